"""benchmarks/gpu_lowering.py: what it counts in a lowered program, and its flags.

The lowering itself needs JAX's CUDA plugin in a virtual environment of its own
(`bash benchmarks/gpu_lowering.sh`); these tests read program text written out here.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gpu_lowering  # noqa: E402


def fused_call(kernel, mask_type):
    config = rf"\22is_flash_attention\22: true, \22mask_type\22: \22{mask_type}\22, \22x\22: 1"
    return (
        f"  %7:3 = stablehlo.custom_call @__cudnn${kernel}(%1, %2, %3) "
        f'{{api_version = 2 : i32, backend_config = "{{{config}}}"}} : '
        "(tensor<3x12x8x64xbf16>) -> tensor<3x12x8x64xbf16>"
    )


def test_fused_calls_are_counted_by_kernel_and_mask_type():
    program = "\n".join(
        [
            fused_call("fmhaSoftmax", "PADDING_CAUSAL"),
            fused_call("fmhaSoftmax", "PADDING_CAUSAL"),
            fused_call("fmhaSoftmaxBackward", "PADDING_CAUSAL"),
            fused_call("fmhaScaleBiasSoftmax", "CAUSAL"),
            "  %8 = stablehlo.dot_general %1, %2 : tensor<3x8x12x12xf32>",
        ]
    )
    assert gpu_lowering.count_fused_calls(program) == {
        ("fmhaSoftmax", "PADDING_CAUSAL"): 2,
        ("fmhaSoftmaxBackward", "PADDING_CAUSAL"): 1,
        ("fmhaScaleBiasSoftmax", "CAUSAL"): 1,
    }


def test_attention_shaped_floats_are_found_and_masks_and_heads_apart_are_not():
    program = (
        "tensor<3x8x12x12xf32> tensor<3x8x12x20xbf16> "  # logits: found
        "tensor<3x8x12x12xi1> tensor<3x1x12x20xbf16> tensor<3x8x12x64xbf16>"  # not
    )
    found = gpu_lowering.attention_shaped_floats(program, 3, 8, (12, 20))
    assert sum(found.values()) == 2


def test_flags():
    assert gpu_lowering.parse_args([]).models == ["translation", "language_modeling", "prefill"]
    with pytest.raises(SystemExit):
        gpu_lowering.parse_args(["--models", "translation,vision"])
