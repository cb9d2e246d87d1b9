"""benchmarks/gpu.py: its FLOP count, its flags, and (slow) its CPU dry run without TensorFlow."""

import os
import sys
from pathlib import Path

import pytest

from tests.fresh_python import run_python

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPT = REPOSITORY / "benchmarks" / "gpu.py"
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import gpu  # noqa: E402

from keras_transformer.models.presets import PRESETS  # noqa: E402


def run_script(*flags, block_tensorflow=False, timeout=300):
    """Runs gpu.py on JAX in a fresh interpreter; optionally with TensorFlow unimportable."""
    prelude = "import runpy, sys\n"
    if block_tensorflow:  # the GPU machine has no TensorFlow
        prelude += "for name in ('tensorflow', 'tensorflow_text'): sys.modules[name] = None\n"
    prelude += (
        f"sys.argv = {[str(SCRIPT), *flags]!r}\nrunpy.run_path(sys.argv[0], run_name='__main__')"
    )
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = str(REPOSITORY)
    return run_python("-c", prelude, env=env, timeout=timeout)


@pytest.mark.parametrize("preset", ["base", "big"])
def test_training_flops_is_six_per_weight_per_token_when_attention_is_negligible(preset):
    size = PRESETS[preset]
    d, ff, layers, vocabulary = (
        size["hidden_dim"],
        size["intermediate_dim"],
        size["num_layers"],
        37000,
    )
    # Matmul weights a token meets: encoder (4 projections + feed-forward), decoder (8
    # projections + feed-forward), the output projection; 2 FLOPs each forward, x3 training.
    weights = layers * (4 * d * d + 2 * d * ff) + layers * (8 * d * d + 2 * d * ff) + d * vocabulary
    flops = gpu.training_flops(size, vocabulary, batch=1, source=1, target=1)
    assert flops == pytest.approx(6 * weights, rel=1e-3)
    # What grows faster than the tokens is attention's QKᵀ and AV: 2 n² d multiply-adds for each
    # of encoder self-, decoder self- and cross-attention per layer, 2 FLOPs each, x3 training.
    n = 1024
    long = gpu.training_flops(size, vocabulary, batch=1, source=n, target=n)
    assert long - n * flops == 3 * 2 * 3 * 2 * layers * d * (n * n - n)
    assert gpu.training_flops(size, vocabulary, batch=4, source=n, target=n) == 4 * long


def test_flags_are_checked():
    with pytest.raises(SystemExit):
        gpu.parse_args(["--parts", "train,fly"])
    with pytest.raises(SystemExit):
        gpu.parse_args(["--steps", "0"])
    args = gpu.parse_args(["--dry-run", "--batch", "3"])
    assert args.settings["batch"] == 3 and args.settings["presets"] == ("tiny",)
    assert gpu.parse_args([]).settings["presets"] == ("big", "base")


@pytest.mark.parametrize("tokens, max_length", [(8192, 64), (96, 24), (4096, 256), (300, 100)])
def test_fit_shapes_are_the_translation_pipelines(tokens, max_length):
    from keras_transformer.text import translation_batch_shapes

    expected = translation_batch_shapes(tokens, max_length)
    assert gpu.fit_batch_shapes(tokens, max_length) == expected
    batches, real = gpu.fit_batches(expected, steps=len(expected) + 1, vocabulary=50)
    shorter = [0] + [length for _, length in expected]
    for (inputs, labels), (rows, length), count, previous in zip(batches, expected, real, shorter):
        assert labels.shape == inputs["encoder_token_ids"].shape == (rows, length)
        assert count == int((labels != 0).sum() + (inputs["encoder_token_ids"] != 0).sum())
        # Each sequence belongs to its bucket: longer than the previous bucket's length.
        lengths = (labels != 0).sum(1)
        assert previous < lengths.min() and lengths.max() <= length


def test_reused_benchmark_functions_keep_their_signatures():
    # gpu.py imports these from the other benchmarks instead of copying them.
    import inspect

    import attention
    import generation
    import translation_step

    assert list(inspect.signature(translation_step.keras_hub_model).parameters) == [
        "settings",
        "vocabulary_size",
        "precision",
    ]
    assert list(inspect.signature(generation.make_runners).parameters) == [
        "shape",
        "jit",
        "contenders",
    ]
    assert "run_limit_bytes" in inspect.signature(attention.measure).parameters


@pytest.mark.slow
def test_dry_run_goes_through_every_part_without_tensorflow(tmp_path):
    output = tmp_path / "results.md"
    done = run_script("--dry-run", "--output", str(output), block_tensorflow=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    text = output.read_text()
    assert "GPU run" in text and "(dry run)" in text and "Command:" in text
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == gpu.HEADER
    rows = [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]
    ]
    parts = [(r["part"], r["contender"]) for r in rows]
    assert parts == [
        ("fit", "ours"),
        ("train", "ours"),
        ("train", "keras_hub"),
        ("attention", "ours"),
        ("attention", "ours_causal"),
        ("attention", "keras"),
        ("attention", "naive"),
        ("generate", "ours"),
        ("generate", "keras_hub"),
    ]
    for r in rows:
        assert not r["note"].startswith(("failed", "skipped")), r
        assert float(r["tokens/s"].replace(",", "")) > 0
        assert float(r["ms"].replace(",", "")) > 0
    # The fit part: 2 fixed shapes in the dry run, each compiled once.
    assert rows[0]["note"].startswith("2 compilations of the train step")
    for r in rows[1:3]:
        assert r["MFU (989 TFLOP/s)"].endswith("%") and r["MFU (measured peak)"].endswith("%")
    for r in rows[3:7]:
        assert float(r["memory GiB"]) >= 0 and "einsum-softmax (XLA)" in r["note"]
