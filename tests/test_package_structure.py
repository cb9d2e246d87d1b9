"""The package's import rules: ops → layers → models, and nothing imports examples/."""

import ast
import pathlib

import pytest

import keras_transformer

PACKAGE = pathlib.Path(keras_transformer.__file__).parent

# Which top-level subpackages each subpackage may import from.
ALLOWED = {
    "ops": {"ops"},
    "layers": {"ops", "layers"},
    "training": {"ops", "training"},
    "distribution": {"distribution"},
    "models": {"ops", "layers", "models", "training", "generation", "distribution"},
    "generation": {"ops", "generation"},
    "text": {"text"},
    "saving": {
        "ops",
        "layers",
        "models",
        "generation",
        "training",
        "distribution",
        "text",
        "saving",
    },
}


def imported_modules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("subpackage", sorted(ALLOWED))
def test_imports_flow_one_way(subpackage):
    folder = PACKAGE / subpackage
    if not folder.exists():
        pytest.skip(f"{subpackage} not present")
    for path in folder.rglob("*.py"):
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "examples":
                pytest.fail(f"{path} imports examples/")
            if parts[0] == "keras_transformer" and len(parts) > 1 and parts[1] != "version":
                assert parts[1] in ALLOWED[subpackage], f"{path} imports {module}"


# Device detection and compiled generation need the backend itself; nothing else does.
BACKEND_IMPORTS_ALLOWED = ("models/factory.py", "generation/")


def test_layers_use_keras_ops_not_tensorflow():
    for subpackage in ("ops", "layers", "models", "generation", "training"):
        for path in (PACKAGE / subpackage).rglob("*.py"):
            relative = path.relative_to(PACKAGE).as_posix()
            if relative.startswith(BACKEND_IMPORTS_ALLOWED):
                continue
            for module in imported_modules(path):
                assert module.split(".")[0] not in ("tensorflow", "jax", "torch"), (
                    f"{relative} imports {module}"
                )


def test_version():
    assert keras_transformer.__version__.count(".") == 2
