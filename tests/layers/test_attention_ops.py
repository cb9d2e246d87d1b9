import numpy as np
import pytest
from keras import ops

from keras_transformer.ops import causal_mask, scaled_dot_product_attention

# Backend-agnostic: runs on JAX too (`-m backend_agnostic`).
pytestmark = pytest.mark.backend_agnostic


def test_causal_mask_values():
    np.testing.assert_array_equal(causal_mask(3), np.tril(np.ones((3, 3), bool)))
    # Two new queries at positions 2 and 3 of a 5-slot cache.
    expected = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], bool)
    np.testing.assert_array_equal(causal_mask(2, 5, start_index=2), expected)


@pytest.mark.parametrize("return_scores", [False, True])
def test_scale_argument(rng, return_scores):
    q = rng.standard_normal((1, 3, 1, 4)).astype("float32")
    k = rng.standard_normal((1, 3, 1, 4)).astype("float32")
    out = scaled_dot_product_attention(q, k, k, scale=1.0, return_attention_scores=return_scores)
    out = out[0] if return_scores else out
    logits = q[0, :, 0] @ k[0, :, 0].T
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out)[0, :, 0], probs @ k[0, :, 0], rtol=1e-5, atol=1e-6)


def test_dropout_only_in_training(rng):
    q = rng.standard_normal((2, 8, 2, 4)).astype("float32")
    base = scaled_dot_product_attention(q, q, q)
    inference = scaled_dot_product_attention(q, q, q, dropout=0.5, training=False)
    np.testing.assert_allclose(base, inference, rtol=1e-6, atol=1e-6)
    training = scaled_dot_product_attention(q, q, q, dropout=0.5, training=True, seed=1)
    assert not np.allclose(base, training)


@pytest.mark.parametrize(
    "shapes, match",
    [
        (
            ((1, 2, 2, 4), (1, 3, 2, 5), (1, 3, 2, 5)),
            "`query` and `key` must have the same head size",
        ),
        (((1, 2, 2, 4), (1, 3, 2, 4), (1, 4, 2, 4)), "`key` and `value` must have the same length"),
        (((1, 2, 3, 4), (1, 3, 2, 4), (1, 3, 2, 4)), r"query heads \(3\) must be a multiple"),
        (((2, 2, 4), (1, 3, 2, 4), (1, 3, 2, 4)), "`query` must have rank 4"),
    ],
)
def test_input_errors(shapes, match):
    q, k, v = (ops.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(q, k, v)


def test_mask_shape_error():
    q = ops.zeros((1, 2, 2, 4))
    with pytest.raises(ValueError, match="`mask` must broadcast to .* query axis has length 3"):
        scaled_dot_product_attention(q, q, q, mask=np.ones((1, 3, 2), bool))


def test_dropout_error():
    q = ops.zeros((1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)"):
        scaled_dot_product_attention(q, q, q, dropout=1.0)
