"""benchmarks/fused_kernel_in_loop.py: both loops compute the same, flags, a tiny run."""

import sys
from pathlib import Path

import keras
import numpy as np
import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import fused_kernel_in_loop  # noqa: E402


def test_both_loops_compute_the_same():
    fns = fused_kernel_in_loop.loops(width=16, steps=3)
    x = keras.random.normal((2, 16), seed=0)
    outputs = [keras.ops.convert_to_numpy(fn(x)) for fn in fns.values()]
    assert not np.allclose(outputs[0], keras.ops.convert_to_numpy(x))
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "flags, message",
    [(["--rows", "0"], "--rows must be a positive integer"), (["--width", "12"], "multiple of 8")],
)
def test_bad_flags_are_refused(flags, message, capsys):
    with pytest.raises(SystemExit):
        fused_kernel_in_loop.main(flags)
    assert message in capsys.readouterr().err


def test_tiny_run_prints_the_ratio(capsys):
    fused_kernel_in_loop.main(["--width", "16", "--rows", "2", "--steps", "2", "--rounds", "1"])
    assert "per-step / once:" in capsys.readouterr().out
