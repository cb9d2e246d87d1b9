"""Why attention divides by √d_k: softmax saturation against the head size.

For random queries and keys with unit-variance entries, a dot product q·k has
variance d_k. Unscaled, the logits spread further apart as d_k grows, the
softmax puts nearly all its weight on one key and its gradient vanishes.
Divided by √d_k the logits keep unit variance at every d_k.

The attention probabilities come from
`keras_transformer.ops.scaled_dot_product_attention` (`scale=1.0` for the
unscaled curve, the default `1/sqrt(d_k)` otherwise); the softmax Jacobian
`diag(p) - p pᵀ` is evaluated from those probabilities.

Run as `python docs/figures/softmax_saturation.py [OUTPUT_DIR]`.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_transformer.ops import scaled_dot_product_attention  # noqa: E402

HEAD_SIZES = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
NUM_KEYS = 16
NUM_QUERIES = 256
SEED = 0


def softmax_statistics(head_dim, scaled, num_keys=NUM_KEYS, num_queries=NUM_QUERIES, seed=SEED):
    """Mean largest attention weight and mean softmax-Jacobian norm.

    Args:
        head_dim: int, the head size d_k.
        scaled: bool, divide the logits by √d_k (the paper) or not.
        num_keys: int, keys each query attends to.
        num_queries: int, independent queries averaged over.
        seed: int, seed of the random queries and keys.

    Returns:
        `(mean_max_weight, mean_jacobian_norm)`, two floats.
    """
    rng = np.random.default_rng(seed + head_dim)
    query = rng.standard_normal((num_queries, 1, 1, head_dim)).astype("float32")
    key = rng.standard_normal((num_queries, num_keys, 1, head_dim)).astype("float32")
    _, scores = scaled_dot_product_attention(
        query,
        key,
        key,
        return_attention_scores=True,
        scale=None if scaled else 1.0,
    )
    p = ops.convert_to_numpy(scores)[:, 0, 0, :].astype("float64")  # (queries, keys)
    jacobian = np.einsum("qi,ij->qij", p, np.eye(num_keys)) - np.einsum("qi,qj->qij", p, p)
    return float(p.max(axis=-1).mean()), float(np.linalg.norm(jacobian, axis=(1, 2)).mean())


def main(output_dir):
    """Writes `softmax_saturation.png` into `output_dir`."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    rows = {
        scaled: np.array([softmax_statistics(d, scaled) for d in HEAD_SIZES])
        for scaled in (False, True)
    }
    plt.rcParams.update({"font.size": 9, "svg.hashsalt": "keras_transformer"})
    figure, (left, right) = plt.subplots(1, 2, figsize=(8.0, 3.2), dpi=110)
    styles = {
        False: dict(label="unscaled  q·k", color="#c0392b", marker="o"),
        True: dict(label="scaled  q·k / √d_k", color="#2471a3", marker="s"),
    }
    for scaled, values in rows.items():
        left.plot(HEAD_SIZES, values[:, 0], **styles[scaled])
        right.plot(HEAD_SIZES, values[:, 1], **styles[scaled])
    left.axhline(1.0 / NUM_KEYS, color="grey", linestyle=":", linewidth=1)
    left.text(HEAD_SIZES[0], 1.0 / NUM_KEYS + 0.02, "uniform 1/16", color="grey", fontsize=8)
    left.set_title(f"largest softmax weight ({NUM_KEYS} keys)")
    left.set_ylim(0, 1.05)
    right.set_title("softmax Jacobian norm ‖diag(p) − ppᵀ‖")
    right.set_ylim(bottom=0)
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(HEAD_SIZES, [str(d) for d in HEAD_SIZES])
        axis.set_xlabel("head size d_k")
        axis.grid(alpha=0.3)
    left.legend(loc="center right", frameon=False)
    figure.tight_layout()
    figure.savefig(output_dir / "softmax_saturation.png", metadata={"Software": None})
    plt.close(figure)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/assets/figures")
