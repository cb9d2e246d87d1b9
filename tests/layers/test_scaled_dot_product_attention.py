import numpy as np
import pytest

from keras_transformer.layers import ScaledDotProductAttention
from keras_transformer.ops import scaled_dot_product_attention
from tests.harness import run_layer_test

# Backend-agnostic: runs on JAX too (`-m backend_agnostic`).
pytestmark = pytest.mark.backend_agnostic

B, T, S, H, D = 2, 4, 6, 3, 8


def test_layer_contract_rank4(rng):
    q = rng.standard_normal((B, T, H, D)).astype("float32")
    k = rng.standard_normal((B, S, H, D)).astype("float32")
    run_layer_test(
        ScaledDotProductAttention,
        {"dropout": 0.2, "seed": 1},
        {"query": q, "key": k, "value": k},
        (B, T, H, D),
        run_gradients=False,  # no weights
        run_training=False,
    )


def test_rank3_inputs_are_one_head(rng):
    q = rng.standard_normal((B, T, D)).astype("float32")
    k = rng.standard_normal((B, S, D)).astype("float32")
    mask = rng.random((B, T, S)) > 0.3
    out, scores = ScaledDotProductAttention()(
        q, k, attention_mask=mask, return_attention_scores=True
    )
    expected = scaled_dot_product_attention(q[:, :, None], k[:, :, None], k[:, :, None], mask=mask)
    np.testing.assert_allclose(out, np.asarray(expected)[:, :, 0], rtol=1e-5, atol=1e-6)
    assert scores.shape == (B, T, S)


def test_layer_equals_function(rng):
    q = rng.standard_normal((B, T, H, D)).astype("float32")
    k = rng.standard_normal((B, T, H, D)).astype("float32")
    v = rng.standard_normal((B, T, H, 5)).astype("float32")
    out = ScaledDotProductAttention(scale=0.3)(q, k, v, use_causal_mask=True)
    expected = scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"`dropout` must be a float in \[0, 1\)"):
        ScaledDotProductAttention(dropout=-0.1)
    with pytest.raises(ValueError, match="`scale` must be a float"):
        ScaledDotProductAttention(scale="big")
