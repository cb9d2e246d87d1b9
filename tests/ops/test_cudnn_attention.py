"""JAX's fused path (padding as lengths, causality as a flag) equals the explicit path.

JAX's `implementation="xla"` takes the same arguments as its cuDNN kernel, so the path of
`keras_transformer.ops.cudnn_attention` is compared on the CPU; that it lowers to cuDNN's
calls is `benchmarks/gpu_lowering.py`'s check.
"""

import keras
import numpy as np
import pytest

from keras_transformer.ops import attention, backend_paths

pytestmark = [
    pytest.mark.backend_agnostic,
    pytest.mark.skipif(keras.backend.backend() != "jax", reason="a JAX kernel"),
]

to_numpy = keras.ops.convert_to_numpy
B, T, S, HEADS, SIZE = 4, 6, 6, 4, 8

# Rows of each padding: full, short, all padding (zeros on both paths), and, for "left"
# and "scattered", padding that the lengths cannot say.
PADDINGS = {
    "right": [[1] * 6, [1, 1, 1, 0, 0, 0], [0] * 6, [1, 0, 0, 0, 0, 0]],
    "left": [[1] * 6, [0, 0, 1, 1, 1, 1], [0] * 6, [0, 0, 0, 0, 0, 1]],
    "scattered": [[1, 0, 1, 1, 0, 1], [1, 1, 1, 0, 0, 0], [0] * 6, [0, 1, 0, 1, 0, 1]],
}


def inputs(seed=0, query_length=T, kv_heads=HEADS):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(B, query_length, HEADS, SIZE)).astype("float32")
    k, v = (rng.normal(size=(B, S, kv_heads, SIZE)).astype("float32") for _ in range(2))
    return q, k, v


def both_paths(monkeypatch, **arguments):
    """`attend` on the explicit path and on the fused kernel's path (`xla` on the CPU)."""
    outputs = {}
    for kernel in (None, "xla"):
        monkeypatch.setattr(attention, "fused_attention_kernel", lambda *_, kernel=kernel: kernel)
        outputs[kernel] = to_numpy(attention.attend(**arguments))
    return outputs[None], outputs["xla"]


@pytest.mark.parametrize("padding", sorted(PADDINGS))
@pytest.mark.parametrize("causal", [False, True])
def test_padded_and_causal_self_attention(monkeypatch, padding, causal):
    q, k, v = inputs()
    valid = np.array(PADDINGS[padding], bool)
    explicit, fused = both_paths(
        monkeypatch, query=q, key=k, value=v, key_padding=valid, causal=causal
    )
    np.testing.assert_allclose(fused, explicit, rtol=1e-5, atol=1e-6)
    assert not fused[2].any()  # every key padded: zeros


def test_cross_attention_over_a_padded_source_with_padded_queries(monkeypatch):
    q, k, v = inputs(1, query_length=3, kv_heads=2)  # grouped-query heads too
    explicit, fused = both_paths(
        monkeypatch,
        query=q,
        key=k,
        value=v,
        query_padding=np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]], bool),
        key_padding=np.array(PADDINGS["right"], bool),
    )
    np.testing.assert_allclose(fused, explicit, rtol=1e-5, atol=1e-6)
    assert not fused[1, 2].any() and not fused[3].any()


def test_a_prefill_attends_causally_from_the_caches_first_slot(monkeypatch):
    q, k, v = inputs(2, query_length=4)  # 4 new steps at positions 0-3 of a 6-slot cache
    explicit, fused = both_paths(monkeypatch, query=q, key=k, value=v, causal=True)
    np.testing.assert_allclose(fused, explicit, rtol=1e-5, atol=1e-6)


def test_what_the_kernel_cannot_say_stays_on_the_explicit_path(monkeypatch):
    calls = []
    monkeypatch.setattr(attention, "fused_attention_kernel", lambda *_: "xla")
    import keras_transformer.ops.cudnn_attention as module

    real = module.padded_attention
    monkeypatch.setattr(
        module, "padded_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    q, k, v = inputs()
    attention.attend(q, k, v, causal=True)
    assert len(calls) == 1
    cannot = [
        dict(mask=np.ones((1, 1, T, S), bool)),  # an arbitrary mask
        dict(dropout=0.1, seed=1),
        dict(return_attention_scores=True),
        dict(bias=np.zeros((1, HEADS, T, S), "float32")),
    ]
    for arguments in cannot:
        attention.attend(q, k, v, causal=True, **arguments)
    q_step = q[:, :1]  # one step past the cache's first slot is a mask, not the flag
    attention.attend(q_step, k, v, mask=np.ones((1, 1, 1, S), bool))
    attention.attend(q_step, k, v, key_padding=np.ones((B, S), bool))  # a decoding step
    attention.attend(q[:, :2], k, v, elementwise=True)  # beams sharing a cache row
    assert len(calls) == 1


@pytest.mark.parametrize("padding", ["right", "left"])
def test_gradients_agree(monkeypatch, padding):
    import jax

    q, k, v = inputs(3)
    valid = np.array(PADDINGS[padding], bool)
    weights = np.random.default_rng(4).normal(size=q.shape).astype("float32")
    gradients = {}
    for kernel in (None, "xla"):
        monkeypatch.setattr(attention, "fused_attention_kernel", lambda *_, kernel=kernel: kernel)

        def loss(q, k, v):
            outputs = attention.attend(q, k, v, key_padding=valid, causal=True)
            return (outputs * weights).sum()

        gradients[kernel] = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    for explicit, fused in zip(gradients[None], gradients["xla"]):
        np.testing.assert_allclose(fused, explicit, rtol=1e-4, atol=1e-5)


def test_the_kernel_is_chosen_for_half_precision_heads_on_a_gpu(monkeypatch):
    choose = backend_paths.fused_attention_kernel
    assert choose("float32", 64, True) == "cudnn"  # asked for: JAX raises where it cannot
    assert choose("bfloat16", 64, False) is None
    assert choose("bfloat16", 64, None) is None  # this CPU
    monkeypatch.setattr(keras.distribution, "list_devices", lambda *_: ["gpu:0"])
    assert choose("bfloat16", 64, None) == "cudnn"
    assert choose("float16", 128, None) == "cudnn"
    for dtype, head_dim in (("float32", 64), ("bfloat16", 60), ("bfloat16", 256)):
        assert choose(dtype, head_dim, None) is None
