"""The examples in the docstrings of the public classes' methods run too.

`test_docstrings.py` runs each public name's own docstring; users also read the methods'
(`generate`, `enable_lora`, `decode_step`, the tokenizer's `tokenize`, ...), so every
public method, property or class method that our package defines on a class of an
`__all__` (including base classes of ours), and whose docstring has a `>>>` example, runs
here with the globals of the module that defines it.
"""

import inspect

import pytest

from tests.docs.docs_helpers import public_objects, run_doctests


def documented_methods():
    """`{"Class.method": (function, module)}` for every method with a doctest."""
    found = {}
    for _, _, obj in public_objects():
        if not inspect.isclass(obj):
            continue
        for owner in obj.__mro__:
            if not owner.__module__.startswith("keras_transformer"):
                continue
            for attribute, value in vars(owner).items():
                if attribute.startswith("_"):
                    continue
                function = value.fget if isinstance(value, property) else value
                if isinstance(function, (classmethod, staticmethod)):
                    function = function.__func__
                if not inspect.isfunction(function) or ">>>" not in (function.__doc__ or ""):
                    continue
                found.setdefault(f"{owner.__name__}.{attribute}", (function, owner.__module__))
    return found


METHODS = documented_methods()


def test_the_models_methods_are_found():
    # The methods users call most; a refactor that hides them from this test fails here.
    for name in ("generate", "enable_lora", "merge_lora", "from_encoder", "tokenize"):
        assert any(key.endswith(f".{name}") for key in METHODS), f"no documented {name}"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_examples_run(name):
    function, module_name = METHODS[name]
    found, failures = run_doctests(function, name, module_name)
    assert found, f"{name}: its >>> lines are not a doctest"
    assert not failures, failures
