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


# Top-level modules that import nothing from the package, so every subpackage may use them.
LEAVES = {"version", "compat", "validation", "sublayer_names"}


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
            if parts[0] == "keras_transformer" and len(parts) > 1 and parts[1] not in LEAVES:
                assert parts[1] in ALLOWED[subpackage], f"{path} imports {module}"


# Device detection, the backend's own compiler and a backend's own kernel (JAX's fused
# attention with sequence lengths, which Keras's op cannot pass) need the backend itself;
# nothing else does.
BACKEND_IMPORTS_ALLOWED = ("models/device.py", "ops/backend_paths.py", "ops/cudnn_attention.py")


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


def test_leaves_import_nothing_from_the_package():
    for leaf in LEAVES:
        for module in imported_modules(PACKAGE / f"{leaf}.py"):
            assert not module.startswith("keras_transformer"), f"{leaf}.py imports {module}"


PRIVATE_MODULES = ("keras.src", "tensorflow.python", "tensorflow_text.python")


def test_only_compat_imports_private_modules():
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "compat.py":
            continue
        for module in imported_modules(path):
            assert not module.startswith(PRIVATE_MODULES), f"{relative} imports {module}"


def test_only_compat_reads_other_objects_private_attributes():
    # `obj._name` on anything but `self` / `cls`: another object's internals.
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                pytest.fail(f"{relative}:{node.lineno} reads {ast.unparse(node)}")


# Saving, distribution, the device choice and the factory (which records the backend in
# `build_info`) may ask which backend runs; the numerics ask `ops/backend_paths.py`.
BACKEND_QUERIES_ALLOWED = (
    "ops/backend_paths.py",
    "models/device.py",
    "models/factory.py",
    "saving/",
    "distribution/",
)


def test_only_backend_paths_asks_which_backend_runs_the_numerics():
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(BACKEND_QUERIES_ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("backend.backend"):
                pytest.fail(f"{relative}:{node.lineno} asks keras.backend.backend()")


def test_version():
    assert keras_transformer.__version__.count(".") == 2
