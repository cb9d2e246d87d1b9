"""What the documentation tests share: the public subpackages and how doctests run."""

import doctest
import sys

# The subpackages whose `__all__` is the public API the site and the docstrings cover.
SUBPACKAGES = [
    "layers",
    "ops",
    "models",
    "generation",
    "training",
    "text",
    "saving",
    "distribution",
]


def run_doctests(obj, name, module_name):
    """Runs the doctests of `obj`'s own docstring with its module's globals.

    Returns `(number of doctests found, failure report)`; the report is empty when every
    example printed what it says.
    """
    module = sys.modules[module_name]
    finder = doctest.DocTestFinder(recurse=False)
    tests = [
        test
        for test in finder.find(obj, name, module=module, globs=dict(vars(module)))
        if test.examples
    ]
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    return len(tests), "".join(report) if runner.summarize(verbose=False).failed else ""
