"""Every public name has a docstring with Args, Returns and an Example whose doctests pass.

"Public" is each subpackage's `__all__`. The doctests of an object's own docstring
(not its methods') run with the globals of the module that defines it, as
`python -m doctest` would, so an example can never go stale.
"""

import importlib
import inspect
import re

import pytest

from tests.docs.docs_helpers import public_objects, run_doctests

# Entries of `__all__` that are not classes or functions, and why they are exempt.
EXEMPT = {
    "models.PRESETS": "a dict of preset sizes, documented in the presets module's docstring",
}

EXAMPLE = re.compile(r"^\s*Examples?:\s*$", re.MULTILINE)
SECTION = re.compile(r"^\s*(?P<name>[A-Z][A-Za-z ]*):\s*$", re.MULTILINE)


NAMES = [f"{package}.{name}" for package, name, _ in public_objects()]
CHECKED = [name for name in NAMES if name not in EXEMPT]


def resolve(qualified):
    package, name = qualified.split(".")
    return getattr(importlib.import_module(f"keras_transformer.{package}"), name)


def own_docstring(obj):
    """The object's own docstring (a class's, not one inherited from Keras)."""
    return obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__


def named_parameters(obj):
    """The parameters a caller names: not self, not *args / **kwargs."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    skipped = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in signature.parameters.values() if p.kind not in skipped]


def defines_its_signature(obj):
    """Whether our code defines the signature (a class may keep Keras's `__init__`)."""
    if not inspect.isclass(obj):
        return True
    owner = next(c for c in obj.__mro__ if "__init__" in c.__dict__)
    return owner.__module__.startswith("keras_transformer")


def sections(docstring):
    """`{"Args": text, ...}`: each Google-style section's lines up to the next header."""
    found = {}
    matches = list(SECTION.finditer(docstring))
    for match, following in zip(matches, matches[1:] + [None]):
        end = following.start() if following else len(docstring)
        found[match.group("name")] = docstring[match.end() : end]
    return found


def test_the_names_are_the_subpackages_all():
    assert len(NAMES) >= 60, len(NAMES)
    assert set(EXEMPT) <= set(NAMES), set(EXEMPT) - set(NAMES)
    for name in EXEMPT:
        obj = resolve(name)
        assert not (inspect.isclass(obj) or callable(obj)), f"{name} is callable: document it"


@pytest.mark.parametrize("name", CHECKED)
def test_docstring_sections(name):
    obj = resolve(name)
    docstring = own_docstring(obj)
    assert docstring, f"{name} has no docstring of its own"
    found = sections(inspect.cleandoc(docstring))
    parameters = named_parameters(obj)
    if parameters:
        assert "Args" in found, f"{name} takes {parameters} but has no Args: section"
        # A class keeping Keras's __init__ may describe the rest as **kwargs.
        if defines_its_signature(obj):
            args = found["Args"]
            missing = [p for p in parameters if not re.search(rf"^\s*\**{p}\b", args, re.M)]
            assert not missing, f"{name}: Args: does not describe {missing}"
    if not inspect.isclass(obj):
        assert "Returns" in found or "Yields" in found, f"{name} has no Returns: section"
    assert EXAMPLE.search(docstring), f"{name} has no Example: section"
    example = docstring[EXAMPLE.search(docstring).end() :]
    assert re.search(r"^\s*>>> ", example, re.M), f"{name}: its Example: has no >>> line"


@pytest.mark.parametrize("name", CHECKED)
def test_docstring_examples_run(name):
    obj = resolve(name)
    found, failures = run_doctests(obj, name, obj.__module__)
    assert found, f"{name} has no doctest"
    assert not failures, failures
