"""What the documentation tests share: the public subpackages and how doctests run."""

import doctest
import importlib
import importlib.util
import inspect
import pathlib
import re
import sys

_SECTIONS = (
    pathlib.Path(__file__).resolve().parents[2] / "docs" / "api" / "griffe_keras_sections.py"
)
_SPEC = importlib.util.spec_from_file_location("griffe_keras_sections", _SECTIONS)
keras_sections = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(keras_sections)

# The subpackages whose `__all__` is the public API the site and the docstrings cover.
SUBPACKAGES = keras_sections.PUBLIC_PACKAGES

# Words of the repository's upkeep, which the pages for users (and the docstrings the API
# pages show) leave out: tests/docs/test_user_pages.py reads the sources, test_site.py the
# built API pages.
MAINTAINER_WORDS = {
    "a figure's script": re.compile(r"docs/figures/"),
    "a private Keras path": re.compile(r"\bkeras\.src\b"),
    "a crash story": re.compile(r"segmentation fault|\bsegfault", re.IGNORECASE),
    "the site's build settings": re.compile(r"\b(?:SITE|REPO)_URL\b"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    "the documentation's build": re.compile(
        r"\b(?:the|this) documentation(?:'s)? build|\bbuild(?:s|ing)? (?:this|the) site\b",
        re.IGNORECASE,
    ),
    "the repository's tests": re.compile(r"(?<![\w./-])tests/"),
    "a RESULTS file as text, not a link": re.compile(r"(?<![(/\w])\S*RESULTS\.md"),
}


def public_objects():
    """Every public name: `(subpackage, name, object)` for each entry of an `__all__`."""
    for package in SUBPACKAGES:
        module = importlib.import_module(f"keras_transformer.{package}")
        for name in module.__all__:
            yield package, name, getattr(module, name)


def run_doctests(obj, name, module_name):
    """Runs the doctests of `obj`'s own docstring as the API pages show them.

    The pages add the imports an example needs (docs/api/griffe_keras_sections.py), found
    from its module's globals; the example then runs in an empty namespace, as it does for
    a reader who copies it, so an example that uses a name the page does not import fails.

    Returns `(number of doctests found, failure report)`; the report is empty when every
    example printed what it says.
    """
    module = sys.modules[module_name]
    docstring = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    docstring = inspect.cleandoc(docstring or "")
    shown = keras_sections.with_imports(docstring, vars(module))
    test = doctest.DocTestParser().get_doctest(
        shown, {"__name__": f"{module_name}.__doctest__"}, name, module.__file__, 0
    )
    tests = [test] if test.examples else []
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    return len(tests), "".join(report) if runner.summarize(verbose=False).failed else ""
