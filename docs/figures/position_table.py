"""The sinusoidal position table of the paper, drawn by `SinusoidalPositionEncoding`.

Left: `PE[pos, 2i] = sin(pos / 10000^(2i/d))`, `PE[pos, 2i+1] = cos(...)` for 128
positions and d = 64: fast waves in the first dimensions, slow ones in the last.
Right: the dot product `PE[p] · PE[p + k]` against the offset k, for several
starting positions p; the curves lie on top of each other because the dot
product is `sum_i cos(k ω_i)`, a function of the offset alone.

Run as `python docs/figures/position_table.py [OUTPUT_DIR]`.
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

from keras_transformer.layers import SinusoidalPositionEncoding  # noqa: E402

LENGTH = 128
WIDTH = 64
STARTS = (0, 16, 48)
MAX_OFFSET = 64


def position_table(length=LENGTH, width=WIDTH):
    """The `(length, width)` table computed by `SinusoidalPositionEncoding`."""
    table = SinusoidalPositionEncoding()(np.zeros((length, width), dtype="float32"))
    return ops.convert_to_numpy(table).astype("float64")


def main(output_dir):
    """Writes `position_table.png` into `output_dir`."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    table = position_table()
    plt.rcParams.update({"font.size": 9})
    figure, (left, right) = plt.subplots(
        1, 2, figsize=(8.4, 3.3), dpi=110, gridspec_kw={"width_ratios": [1.15, 1]}
    )
    image = left.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="upper")
    left.set_title(f"PE[position, dimension], d = {WIDTH}")
    left.set_xlabel("dimension (even: sin, odd: cos)")
    left.set_ylabel("position")
    figure.colorbar(image, ax=left, fraction=0.046, pad=0.03)
    offsets = np.arange(MAX_OFFSET + 1)
    for start, style in zip(STARTS, ("-", "--", ":")):
        dots = table[start + offsets] @ table[start]
        right.plot(offsets, dots, style, linewidth=1.6, label=f"p = {start}")
    right.set_title("PE[p] · PE[p + k] against the offset k")
    right.set_xlabel("offset k")
    right.set_ylabel("dot product")
    right.grid(alpha=0.3)
    right.legend(frameon=False)
    figure.tight_layout()
    figure.savefig(output_dir / "position_table.png", metadata={"Software": None})
    plt.close(figure)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/assets/figures")
