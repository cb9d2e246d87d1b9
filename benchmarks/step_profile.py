"""Where a TensorFlow training step spends its time: op-level profile, grouped by purpose.

`profile(run, logdir)` runs `run()` under the TensorFlow profiler and reads the op statistics
back with XProf, the profiler's own converter (`pip install -e ".[dev,benchmarks]"`);
`categorise` sorts every op into one of `CATEGORIES` by its type and the layer path in its
name. Times are the ops' self times summed over the profiled steps (both CPU threads
together, so shares are of op time, not of wall time), plus the threads' idle time, which is
where the step waits on Python, on the input, or on an op that runs on one thread.
"""

import collections
import glob
import json
import os
import re
import shutil

CATEGORIES = (
    "attention matmuls (QKᵀ, AV)",
    "softmax and masking",
    "Q/K/V and output projections",
    "feed-forward",
    "layer norm",
    "dropout",
    "embeddings and positions",
    "output logits (tied embedding)",
    "loss",
    "accuracy metric",
    "optimizer update",
    "casts, transposes, reshapes",
    "other",
)
_PROJECTIONS = re.compile(r"/(query|key|value|attention_output|output_dense)(_\d+)?/")
_ATTENTION = re.compile(r"(self_attention|cross_attention|_attention_layer)(_\d+)?/")
_LAYOUT = {"Cast", "Transpose", "Reshape", "ConcatV2", "Split", "SplitV", "Squeeze", "Pack"}
# Batched (per head) products are attention's QKᵀ and AV; 2-D ones are projections.
_BATCHED = {"_MklEinsum", "Einsum", "BatchMatMulV2", "_MklBatchMatMulV2"}
_PLAIN = {"_MklMatMul", "MatMul", "_MklNativeFusedMatMul", "_FusedMatMul"}
_MATMULS = _BATCHED | _PLAIN
# Name scopes of the hand-written gradients (keras_transformer/ops): "layer_norm_gradient_3/".
_WRITTEN_GRADIENT = re.compile(r"_gradient(_\d+)?/")


def categorise(op_type, name):
    """The `CATEGORIES` entry of one op, from its type and (layer path) name."""
    lower = name.lower()
    if op_type.startswith("StatelessRandom") or "dropout" in lower:
        return "dropout"
    if "compile_loss" in lower or "cross_entropy" in lower or "loss" in lower.split("/")[0]:
        return "loss"
    if lower.startswith(("adam", "optimizer", "loss_scale", "sgd")) or "/adam/" in lower:
        return "optimizer update"
    if "layer_norm" in lower or "layernorm" in op_type.lower() or "_norm/" in lower:
        return "layer norm"
    if "feed_forward" in lower or "feedforward" in lower or "_intermediate" in lower:
        return "feed-forward"
    if _PROJECTIONS.search(name):
        return "Q/K/V and output projections"
    if _ATTENTION.search(name) or "/attention/" in lower:
        if op_type in _BATCHED:
            return "attention matmuls (QKᵀ, AV)"
        if op_type in _PLAIN or re.search(r"attention(_\d+)?/(add|concat|split)", name):
            # The fused Q/K/V product with its bias, and 2-D output projections.
            return "Q/K/V and output projections"
        if op_type in _LAYOUT:
            return "casts, transposes, reshapes"
        return "softmax and masking"
    if "embedding" in lower or "position" in lower:
        if op_type in _MATMULS:  # keras-hub's `ReversibleEmbedding(reverse=True)`
            return "output logits (tied embedding)"
        return "embeddings and positions"
    if op_type in _MATMULS:
        # What is left of the model's matrix products is the tied output projection.
        return "output logits (tied embedding)"
    if op_type in _LAYOUT:
        return "casts, transposes, reshapes"
    if "metric" in lower or "accuracy" in lower:
        return "accuracy metric"
    return "other"


def profile(run, logdir):
    """Profiles `run()`; returns `({category: (self µs, backward µs)}, idle µs, op rows)`."""
    import tensorflow as tf
    from xprof.convert import raw_to_tool_data

    shutil.rmtree(logdir, ignore_errors=True)
    tf.profiler.experimental.start(logdir)
    try:
        run()
    finally:
        tf.profiler.experimental.stop()
    paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "framework_op_stats", {})
    table = json.loads(data)[0]
    columns = [column["id"] for column in table["cols"]]
    rows = [dict(zip(columns, [cell.get("v") for cell in row["c"]])) for row in table["rows"]]
    totals = collections.defaultdict(lambda: [0.0, 0.0])
    idle = 0.0
    for row in rows:
        if row["type"] == "IDLE":
            idle += row["total_self_time"]
            continue
        category = categorise(row["type"], row["operation"])
        totals[category][0] += row["total_self_time"]
        if row["operation"].startswith("gradient_tape/") or _WRITTEN_GRADIENT.search(
            row["operation"]
        ):
            totals[category][1] += row["total_self_time"]
    return dict(totals), idle, rows


def profile_rows(totals, idle, steps):
    """Table rows: category, ms of op time per step, share of op time, backward share."""
    op_time = sum(total for total, _ in totals.values())
    rows = []
    for category in CATEGORIES:
        total, backward = totals.get(category, (0.0, 0.0))
        if total:
            rows.append(
                [
                    category,
                    f"{total / steps / 1000:.1f}",
                    f"{100 * total / op_time:.1f}%",
                    f"{100 * backward / total:.0f}%",
                ]
            )
    rows.append(["all ops", f"{op_time / steps / 1000:.1f}", "100.0%", "—"])
    rows.append(["idle (both threads)", f"{idle / steps / 1000:.1f}", "—", "—"])
    return rows


PROFILE_HEADER = ["where", "op ms / step", "share of op time", "of which backward"]
