import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def keep_bytecode_aside():
    """Where PYTHONDONTWRITEBYTECODE is set, each test process would compile the Python of
    TensorFlow, Keras and JAX or PyTorch anew (`pip install --no-compile` wrote none): about
    9 s of CPU in each of the dozens of processes a run starts. The compiled files go to a
    folder of their own instead (PYTHONPYCACHEPREFIX, inherited by every process the run
    starts), never next to the sources, and later processes and runs read them from there."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.pycache_prefix:
        return
    import getpass

    # pytest's own folder for this user, private to the user as pytest makes it.
    users_folder = os.path.join(tempfile.gettempdir(), f"pytest-of-{getpass.getuser()}")
    os.makedirs(users_folder, mode=0o700, exist_ok=True)
    folder = os.path.join(users_folder, "bytecode")
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = folder
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.dont_write_bytecode = False


keep_bytecode_aside()
# The suite compiles hundreds of small XLA programs (JAX's eager ops, `jit_compile=True`),
# each run once or twice: compiling them cost more than running them. LLVM's optimisation
# passes and XLA:CPU's fusion emitters (which generate each fusion through MLIR: 30 ms
# for an elementwise op on JAX 0.10, 11 ms without) change how fast the machine code is,
# not what it computes. The processes the tests start inherit the flags. Set before
# TensorFlow or JAX is imported.
for flag in ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"):
    if flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()

# Simulated devices for the `multi_device` tests (tests/distribution), in every test process:
# JAX reads the device count when it starts, TensorFlow's CPU is split below before it runs an
# op. Arrays and variables stay on the first device unless a test distributes them.
JAX_DEVICES, TF_DEVICES = 8, 2
if os.environ.get("KERAS_BACKEND") == "jax" and "device_count" not in os.environ.get(
    "XLA_FLAGS", ""
):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={JAX_DEVICES}"
    ).strip()

# Under pytest-xdist the workers share the cores: OpenMP threads and TensorFlow's thread
# pools, one thread per core in every worker, spun on each other's cores (the PyTorch tests
# took 2.5 times as long in two workers as with one thread each; tests/models and
# tests/saving on TensorFlow 5-10% longer). The processes the tests start inherit it.
if "PYTEST_XDIST_WORKER" in os.environ:
    for variable in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(variable, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def pytest_configure(config):
    # pytest-xdist's controller process runs no test: importing Keras there (and with it
    # TensorFlow, JAX or PyTorch, ~5-10 s) would only delay the workers' start.
    if os.environ.get("PYTEST_XDIST_WORKER") is None and config.getoption("numprocesses", None):
        return
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # Before any test module runs a TensorFlow op (test modules are imported later).
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * TF_DEVICES,
        )


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts with float32, fixed seeds and no leftover global state."""
    import keras

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    # Skipping the full gc.collect() saves ~0.6 s per test; names and global state still reset.
    keras.backend.clear_session(free_memory=False)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# With `-n N` (pytest-xdist, `--dist loadgroup` in pyproject.toml) each group of tests runs in
# one worker: a test module's tests stay together, so its module-scoped fixtures are made
# once, and so do the modules that share one of these session-scoped fixtures (a trained
# example run, the generation tests' models and their compiled programs).
SHARED_SESSION_FIXTURES = (
    "translation_quick_run",
    "classification_quick_run",
    "seq2seq_model",
    "lm_model",
)


# First: xdist's own hook turns the markers into the groups it schedules by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_of = {}  # module path -> group name

    def find(module):
        while group_of.get(module, module) != module:
            module = group_of[module]
        return module

    by_fixture = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        group_of.setdefault(module, module)
        for name in SHARED_SESSION_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                first = by_fixture.setdefault(name, module)
                group_of[find(module)] = find(first)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(find(item.nodeid.split("::")[0])))
