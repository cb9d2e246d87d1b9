"""benchmarks/step_profile.py sorts profiled ops by purpose; translation_step.py's quick run."""

import os
import sys
from pathlib import Path

import pytest

from tests.fresh_python import run_python

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import step_profile  # noqa: E402

# (op type, op name as TensorFlow's profiler reports it) -> category: names from real profiles
# of ours, of the commit before the optimisations and of keras-hub's blocks.
CASES = [
    (
        "_MklNativeFusedMatMul",
        "model/encoder/block_0/self_attention/add",
        "Q/K/V and output projections",
    ),
    (
        "_MklMatMul",
        "gradient_tape/model/decoder/block_1/cross_attention/MatMul_3/MatMul",
        "Q/K/V and output projections",
    ),
    (
        "_MklEinsum",
        "gradient_tape/functional/decoder_0/self_attention/value/einsum/Einsum",
        "Q/K/V and output projections",
    ),
    (
        "_MklBatchMatMulV2",
        "model/decoder/block_0/self_attention/MatMul_1",
        "attention matmuls (QKᵀ, AV)",
    ),
    (
        "_MklEinsum",
        "model/encoder/block_2/self_attention/einsum/Einsum",
        "attention matmuls (QKᵀ, AV)",
    ),
    ("_MklSoftmax", "model/decoder/block_0/cross_attention/Softmax", "softmax and masking"),
    (
        "_MklMatMul",
        "gradient_tape/model/encoder/block_0/feed_forward/intermediate_dense/Tensordot/MatMul",
        "feed-forward",
    ),
    ("Mul", "gradient_tape/model/encoder/block_0/self_attention_layer_norm/mul/Mul", "layer norm"),
    ("Sub", "layer_norm_gradient/sub", "layer norm"),
    (
        "StatelessRandomUniformIntV2",
        "model/encoder/block_0/feed_forward_dropout/stateless_random_uniform",
        "dropout",
    ),
    ("Exp", "compile_loss/label_smoothed_cross_entropy/Exp", "loss"),
    ("TensorScatterUpdate", "label_smoothed_cross_entropy_gradient/TensorScatterUpdate", "loss"),
    ("GreaterEqual", "masked_accuracy/GreaterEqual_1", "accuracy metric"),
    ("_MklMatMul", "model/Tensordot/MatMul", "output logits (tied embedding)"),
    (
        "_MklMatMul",
        "functional/reversible_embedding/Tensordot/MatMul",
        "output logits (tied embedding)",
    ),
    ("AssignSubVariableOp", "adam/AssignSubVariableOp", "optimizer update"),
    ("Cast", "model/Cast_3", "casts, transposes, reshapes"),
]


@pytest.mark.parametrize(("op_type", "name", "category"), CASES)
def test_ops_are_sorted_by_purpose(op_type, name, category):
    assert step_profile.categorise(op_type, name) == category


def test_profile_rows_give_shares_of_op_time():
    totals = {"feed-forward": (300.0, 240.0), "loss": (100.0, 0.0)}
    rows = step_profile.profile_rows(totals, idle=50.0, steps=2)
    assert rows[0] == ["feed-forward", "0.1", "75.0%", "80%"]
    assert rows[1] == ["loss", "0.1", "25.0%", "0%"]
    assert rows[-2][:3] == ["all ops", "0.2", "100.0%"]


@pytest.mark.slow
def test_quick_run_appends_a_table(tmp_path):
    output = tmp_path / "results.md"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    script = REPOSITORY / "benchmarks" / "translation_step.py"
    flags = ["--quick", "--rounds", "1", "--steps", "2", "--batches", "4"]
    completed = run_python(
        script, *flags, "--contenders", "ours,keras_hub", "--output", output, env=env, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    text = output.read_text()
    assert "| ours | " in text and "| keras_hub | " in text
    assert "Command: `python" in text
