"""What one backend saves, every backend loads: the 9 pairs of TensorFlow, JAX and PyTorch.

For each pair (saved on, loaded on), a fresh process of the loading backend loads the four
model classes saved on the other (cross_backend_process.py): a process of its own, so that no
import made by the test process or by another pair can hide a crash. Its outputs must equal
the saving backend's within float32 rounding and its greedy translations token for token; it
must rebuild the optimizers as the public Keras classes, and import no other backend's
private Keras code. (A PyTorch save brought Keras's PyTorch backend into TensorFlow and JAX
processes: a segmentation fault where that import crashes, and on TensorFlow an optimizer
that could not train.) Where the two backends differ (6 directions), the same process runs
the examples' `predict` and `translate` commands on the saved directories, checks that the
classifier's `jit_compile` is the loading backend's default, trains it one step (not on JAX,
where compiling the step alone takes ~10 s) and, on TensorFlow, exports it with
`export_serving`.

The three pairs that save and load on the same backend (a fresh process loading what its own
backend saved) are among the slow tests: in-process `.keras` round trips on every backend
cover their outputs, and a fresh process of each backend is the loader of another backend's
save. So is JAX's save loaded on TensorFlow: TensorFlow loads (and exports) PyTorch's save,
whose optimizers and modules were the ones that broke, and JAX's save is loaded on PyTorch,
where its `jit_compile=True` did. The default run starts five processes.

Nine processes in all (with the slow tests): the test process saves on its own backend
(TensorFlow, in the test command's first stage; the matrix is not `backend_agnostic`, so it
runs there only), and each other backend saves in the process that first loads that save on
it. Each pair is its own pytest-xdist group, so the two workers share the matrix; a save is
made by the first pair that needs it, under a lock, and read by the others. The processes
keep JAX's compiled programs in pytest's folder for this user (and Python's bytecode where
tests/conftest.py says): without them each process spent 5-15 s of CPU compiling what an
earlier one had compiled.
"""

import contextlib
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).with_name("cross_backend_process.py")
# The order the pairs start in, with two workers. The first two save on JAX and PyTorch,
# each in the process that loads TensorFlow's save there (TensorFlow saves in the test
# process): the two workers start on the two longest processes; the pairs that read JAX's
# save, the slowest to make (it compiles every JAX program the others reuse), come last.
PAIRS = [
    ("tensorflow", "jax"),
    ("tensorflow", "torch"),
    ("tensorflow", "tensorflow"),
    ("torch", "torch"),
    ("torch", "tensorflow"),
    ("torch", "jax"),
    ("jax", "jax"),
    ("jax", "tensorflow"),
    ("jax", "torch"),
]
# Among the slow tests (the module's docstring says why).
SLOW_PAIRS = {
    ("tensorflow", "tensorflow"),
    ("torch", "torch"),
    ("jax", "jax"),
    ("jax", "tensorflow"),
}
MODELS = ("seq2seq", "classifier", "masked_lm", "lm")
# What each model is compiled with (cross_backend_process.built_models), rebuilt by name:
# PyTorch's classes would be Keras's private subclasses.
OPTIMIZERS = {
    "seq2seq": ["Adam"],
    "classifier": ["AdamW"],
    "masked_lm": ["Nadam"],
    "lm": ["LossScaleOptimizer", "SGD"],
}
# The same weights' float32 logits (up to ~5) differ by rounding only: at most 2e-6 here.
TOLERANCE = 1e-5
TIMEOUT = 300  # seconds, per process


def installed(backend):
    return importlib.util.find_spec(backend) is not None  # tensorflow, jax, torch


@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    """A folder that every test process of this run sees, pytest-xdist's workers included."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cross_backend"
    folder.mkdir(exist_ok=True)
    return folder


def caches(shared):
    """Where the processes keep what they compile: between runs in pytest's folder for this
    user (`pytest-of-<user>`, private to it), else in this run's."""
    user_folder = shared.parent.parent
    return (user_folder if user_folder.name.startswith("pytest-of-") else shared) / (
        "cross-backend-caches"
    )


@contextlib.contextmanager
def locked(path):
    import fcntl

    with open(path, "w") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


def environment(backend, shared):
    env = {**os.environ, "KERAS_BACKEND": backend}
    # The JAX processes compile the same small programs (an XLA program per eager operation
    # and shape, one per generation loop): each reuses what an earlier one compiled.
    env["JAX_COMPILATION_CACHE_DIR"] = str(caches(shared) / "jax")
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
    return env


def describe(returncode):
    if returncode is None:
        return f"did not finish in {TIMEOUT} s"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        crash = ", a segmentation fault" if name == "SIGSEGV" else ""
        return f"was killed by {name} (exit status {returncode}{crash})"
    return f"failed (exit status {returncode})"


def run_script(backend, shared, cwd, *arguments):
    """`cross_backend_process.py *arguments` in a fresh `backend` process:
    `(returncode, or None on a timeout; the end of its stderr)`."""
    try:
        completed = subprocess.run(
            # `-X faulthandler`: a crash prints the Python stack it happened in.
            [sys.executable, "-X", "faulthandler", str(SCRIPT), *map(str, arguments)],
            env=environment(backend, shared),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        returncode, stderr = completed.returncode, completed.stderr
    except subprocess.TimeoutExpired as error:
        returncode, stderr = None, error.stderr or ""
        stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    return returncode, stderr[-3000:]


def save_here(directory):
    """Saves in this process, on its backend: one process less to start."""
    from tests.saving import cross_backend_process

    try:
        cross_backend_process.save(directory)
    except Exception as error:  # kept for the pairs that wait on this save
        return 1, f"{type(error).__name__}: {error}"
    return 0, ""


def pair_folder(saved_on, loaded_on, shared):
    return shared / f"saved-on-{saved_on}-loaded-on-{loaded_on}"


def make_save(backend, shared):
    """Saves the four models on `backend` once a run, whichever test asks first:
    `(returncode, stderr)` of the process that saved them.

    This process's backend saves here. Any other saves in the process that loads this
    backend's save on it (one of the pairs): loading first, as fresh as every other load,
    then saving, so that the matrix starts nine processes, one per pair.
    """
    directory = shared / f"saved-on-{backend}"
    status = shared / f"saved-on-{backend}.json"
    with locked(shared / f"saved-on-{backend}.lock"):
        if not status.exists():
            here = keras.backend.backend()
            directory.mkdir(exist_ok=True)
            if backend == here:
                outcome = save_here(directory)
            else:
                source = saved_models(here, shared)
                out = pair_folder(here, backend, shared)
                out.mkdir(exist_ok=True)
                outcome = run_script(
                    backend, shared, out,
                    "--load", source, "--out", out, "--examples", "--save", directory,
                )  # fmt: skip
            status.write_text(json.dumps(outcome), encoding="utf-8")
    return json.loads(status.read_text(encoding="utf-8"))


def saved_models(backend, shared):
    """The folder of the four models saved on `backend`."""
    returncode, stderr = make_save(backend, shared)
    if returncode != 0:
        pytest.fail(f"the process saving the models on {backend} {describe(returncode)}:\n{stderr}")
    return shared / f"saved-on-{backend}"


def loading_process(saved_on, loaded_on, shared, tmp_path):
    """Loads what `saved_on` saved in a fresh `loaded_on` process: `(what the process was,
    its returncode, its stderr, the folder of its results)`."""
    examples = saved_on != loaded_on
    if saved_on == keras.backend.backend() and examples:
        returncode, stderr = make_save(loaded_on, shared)  # loaded there first
        process = f"the loading process (which then saved on {loaded_on})"
        return process, returncode, stderr, pair_folder(saved_on, loaded_on, shared)
    directory = saved_models(saved_on, shared)
    returncode, stderr = run_script(
        loaded_on, shared, tmp_path,
        "--load", directory, "--out", tmp_path, *(["--examples"] if examples else []),
    )  # fmt: skip
    return "the loading process", returncode, stderr, tmp_path


def pair_id(pair):
    return f"saved-on-{pair[0]}-loaded-on-{pair[1]}"


@pytest.mark.parametrize(
    ("saved_on", "loaded_on"),
    [
        pytest.param(
            *pair,
            id=pair_id(pair),
            marks=[pytest.mark.xdist_group(pair_id(pair))]
            + ([pytest.mark.slow] if pair in SLOW_PAIRS else []),
        )
        for pair in PAIRS
    ],
)
def test_what_one_backend_saves_another_loads(saved_on, loaded_on, shared, tmp_path):
    for backend in (saved_on, loaded_on):
        if not installed(backend):
            pytest.skip(f"{backend} is not installed (the `dev` extra installs all three)")
    pair = f"saved on {saved_on}, loaded on {loaded_on}"
    process, returncode, stderr, out = loading_process(saved_on, loaded_on, shared, tmp_path)
    assert returncode == 0, f"{pair}: {process} {describe(returncode)}:\n{stderr}"
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["backend"] == loaded_on
    # Before, a PyTorch save brought Keras's PyTorch backend code (`keras.src.backend.torch.*`)
    # into TensorFlow and JAX processes, and its optimizer classes with it.
    assert result["other_backend_modules"] == [], pair
    assert result["optimizers"] == OPTIMIZERS, pair
    directory = saved_models(saved_on, shared)
    for name in MODELS:
        config = (directory / name / "config.json").read_text(encoding="utf-8")
        assert "keras.src.backend" not in config, f"{name} saved on {saved_on}"

    expected = np.load(directory / "reference.npz")
    loaded = np.load(out / "outputs.npz")
    for name in MODELS:
        key = f"{name}_outputs"
        assert loaded[key].shape == expected[key].shape, f"{pair}: {name}"
        np.testing.assert_allclose(
            loaded[key], expected[key], rtol=0, atol=TOLERANCE, err_msg=f"{pair}: {name}"
        )
    reference = json.loads((directory / "reference.json").read_text(encoding="utf-8"))
    # Equal ids are owed only where no step of the saving backend's search is near a tie.
    assert reference["top_two_gap"] > 100 * TOLERANCE, reference["top_two_gap"]
    np.testing.assert_array_equal(
        loaded["seq2seq_generated"], expected["seq2seq_generated"], err_msg=pair
    )

    if saved_on == loaded_on:
        return
    # The examples' commands, on models of another backend.
    labels = [label for label, _ in result["predict"]]
    assert labels == [label for label, _ in reference["predict"]], pair
    np.testing.assert_allclose(
        [probability for _, probability in result["predict"]],
        [probability for _, probability in reference["predict"]],
        rtol=0,
        atol=TOLERANCE,
        err_msg=pair,
    )
    assert result["translate"] == reference["translate"], pair
    # Before, JAX's `jit_compile=True` came along: `torch.compile` for training on PyTorch
    # (107 s for this classifier's first step), and PyTorch's `False` meant eager JAX.
    assert result["jit_compile"]["loaded"] == result["jit_compile"]["default"], pair
    if loaded_on != "jax":
        # Before: on TensorFlow, "TypeError: expected Tensor as element 0 in argument 0, but
        # got ResourceVariable" from PyTorch's AdamW.
        assert np.isfinite(result["loss_after_a_step"]), pair
    if loaded_on == "tensorflow":
        assert result["serving_files_naming_private_code"] == [], pair
