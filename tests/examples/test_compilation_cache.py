"""JAX's persistent compilation cache: the first process writes a program, the next loads it."""

import json
import math
import os

import keras
import pytest

from examples import command_line
from examples.compilation_cache import DEFAULT_DIRECTORY, enable_compilation_cache
from examples.translation import train
from tests.fresh_python import REPOSITORY, run_python

# One small jitted function in a fresh JAX process (Keras imported, TensorFlow not); prints
# the cache folder it was given back and what `jax.monitoring` saw.
COMPILE = """
import json, sys
import jax, jax.numpy as jnp
from examples.compilation_cache import enable_compilation_cache
from examples.compilations import CACHE_LOAD_EVENT

events = []
jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))
jax.monitoring.register_event_duration_secs_listener(
    lambda name, seconds, **kwargs: events.append(name))
folder = enable_compilation_cache(sys.argv[1])
step = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
value = float(step(jnp.ones((8, 8))))
print(json.dumps({
    "folder": folder,
    "value": value,
    "hits": events.count("/jax/compilation_cache/cache_hits"),
    "misses": events.count("/jax/compilation_cache/cache_misses"),
    "loads": events.count(CACHE_LOAD_EVENT),
}))
"""


def compile_in_fresh_jax(folder):
    env = dict(
        os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(REPOSITORY), TF_CPP_MIN_LOG_LEVEL="3"
    )
    result = run_python("-c", COMPILE, folder, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# Two fresh JAX processes (about 6 s each on 2 CPU cores, most of it importing JAX and Keras).
def test_a_second_jax_process_loads_what_the_first_compiled(tmp_path):
    folder = tmp_path / "cache"  # JAX makes it
    first = compile_in_fresh_jax(folder)
    assert first["folder"] == str(folder)
    assert first["value"] == pytest.approx(64 * math.tanh(8), rel=1e-6)
    assert first["hits"] == first["loads"] == 0 and first["misses"] >= 1
    written = sorted(path.name for path in folder.iterdir())
    assert len(written) == first["misses"] and any("lambda" in name for name in written)

    second = compile_in_fresh_jax(folder)
    assert second["value"] == first["value"]
    assert second["hits"] == first["misses"] and second["misses"] == 0
    # What `CompilationCounter` counts as loaded (`--verbose`).
    assert second["loads"] == second["hits"]
    assert sorted(path.name for path in folder.iterdir()) == written


def test_none_turns_nothing_on():
    assert enable_compilation_cache(None) is None


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="JAX is the backend it configures")
def test_other_backends_cache_nothing(tmp_path):
    assert enable_compilation_cache(tmp_path / "cache") is None
    assert not (tmp_path / "cache").exists()


def test_the_flag_defaults_to_a_folder_under_runs_and_turns_off(tmp_path, capsys):
    data = ["--data-dir", str(tmp_path)]  # any folder passes the check before reading
    assert DEFAULT_DIRECTORY == os.path.join("runs", "jax_compilation_cache")
    assert train.parse_args(["--quick", *data]).compilation_cache == DEFAULT_DIRECTORY
    off = train.parse_args(["--quick", *data, "--compilation-cache", "off"])
    assert off.compilation_cache is None
    moved = train.parse_args(["--quick", *data, "--compilation-cache", str(tmp_path / "c")])
    assert moved.compilation_cache == str(tmp_path / "c")

    a_file = tmp_path / "a-file"
    a_file.write_text("keep me")
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--quick", *data, "--compilation-cache", str(a_file)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"--compilation-cache '{a_file}' exists and is not a directory")
    assert a_file.read_text() == "keep me"


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="JAX is the backend it configures")
def test_starting_the_cache_prints_nothing_off_jax(tmp_path, capsys):
    assert command_line.start_compilation_cache(tmp_path / "cache") is None
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "module",
    [
        "examples.translation.train",
        "examples.text_classification.train",
        "examples.text_classification.pretrain",
        "examples.positions.extrapolation",
    ],
)
def test_every_training_command_has_the_flag(module, capsys):
    import importlib

    with pytest.raises(SystemExit):
        importlib.import_module(module).parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--compilation-cache DIR|off" in help_text
    assert "(default: runs/jax_compilation_cache); off: compile anew in every run" in help_text
    assert "No effect on TensorFlow, which keeps no XLA programs between runs" in help_text
