"""The explicit attention path (TensorFlow's, and any with dropout or scores) equals Keras's op."""

import keras
import numpy as np
import pytest

from keras_transformer.ops import scaled_dot_product_attention
from tests.platform_rounding import sums_in_float32

pytestmark = pytest.mark.backend_agnostic


@pytest.mark.parametrize("causal", [False, True])
def test_matches_keras_dot_product_attention(causal):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(3, 7, 2, 8)).astype("float32") for _ in range(3))
    lengths = np.array([7, 5, 3])
    mask = np.arange(7)[None, None, None, :] < lengths[:, None, None, None]  # padded keys
    ours = scaled_dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    # With return_attention_scores the explicit path runs on every backend.
    explicit, _ = scaled_dot_product_attention(
        q, k, v, mask=mask, is_causal=causal, return_attention_scores=True
    )
    reference = keras.ops.dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    for outputs in (ours, explicit):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(outputs),
            keras.ops.convert_to_numpy(reference),
            rtol=1e-5,
            atol=1e-6,
        )


@pytest.mark.parametrize("num_kv_heads", [4, 2])
def test_one_query_row_equals_the_same_row_of_a_longer_query(num_kv_heads):
    # A decoding step (one query row) multiplies and sums instead of taking the batched
    # matmul; row by row it must give what the matmul path gives for the whole query.
    rng = np.random.default_rng(1)
    q = rng.normal(size=(3, 5, 4, 8)).astype("float32")
    k, v = (rng.normal(size=(3, 9, num_kv_heads, 8)).astype("float32") for _ in range(2))
    mask = np.arange(9)[None, None, None, :] < np.array([9, 6, 2])[:, None, None, None]
    full, full_scores = scaled_dot_product_attention(
        q, k, v, mask=mask, return_attention_scores=True
    )
    for row in range(5):
        one, one_scores = scaled_dot_product_attention(
            q[:, row : row + 1], k, v, mask=mask, return_attention_scores=True
        )
        assert tuple(one.shape) == (3, 1, 4, 8)
        assert tuple(one_scores.shape) == (3, 4, 1, 9)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(one),
            keras.ops.convert_to_numpy(full)[:, row : row + 1],
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(one_scores),
            keras.ops.convert_to_numpy(full_scores)[:, :, row : row + 1],
            rtol=1e-5,
            atol=1e-6,
        )
        # The masked keys get no weight (rows 1 and 2 see 6 and 2 keys).
        assert not keras.ops.convert_to_numpy(one_scores)[1, :, 0, 6:].any()
        assert not keras.ops.convert_to_numpy(one_scores)[2, :, 0, 2:].any()


def test_one_query_row_in_bfloat16_matches_float32_on_the_rounded_inputs():
    # Mixed precision decoding: bfloat16 in and out, the error that of bfloat16's rounding
    # of the inputs and of the result, over 512 keys.
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, n, 2, 64)).astype("float32") for n in (1, 512, 512))
    reference = keras.ops.convert_to_numpy(scaled_dot_product_attention(q, k, v))
    q16, k16, v16 = (keras.ops.cast(t, "bfloat16") for t in (q, k, v))
    ours = scaled_dot_product_attention(q16, k16, v16)
    assert keras.backend.standardize_dtype(ours.dtype) == "bfloat16"
    rounded = [keras.ops.convert_to_numpy(keras.ops.cast(t, "float32")) for t in (q16, k16, v16)]
    exact = keras.ops.convert_to_numpy(scaled_dot_product_attention(*rounded))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.cast(ours, "float32")), exact, rtol=1e-2, atol=2e-3
    )
    assert np.abs(exact - reference).max() < 0.05  # bfloat16 inputs, not the sum, set the error


def test_attention_dropout_drops_probabilities_at_its_rate():
    # Zero queries give uniform probabilities 1/16; one-hot values read them back out,
    # so the outputs are the dropped probabilities: 0, or 1/16 / (1 - rate).
    keys = 16
    q = np.zeros((8, 32, 2, 4), "float32")
    k = np.random.default_rng(3).normal(size=(8, keys, 2, 4)).astype("float32")
    v = np.broadcast_to(np.eye(keys, dtype="float32")[None, :, None, :], (8, keys, 2, keys))
    outputs = keras.ops.convert_to_numpy(
        scaled_dot_product_attention(
            q, k, v, dropout=0.25, training=True, seed=keras.random.SeedGenerator(4)
        )
    )
    dropped = outputs == 0
    assert abs(dropped.mean() - 0.25) < 0.02
    np.testing.assert_allclose(outputs[~dropped], 1 / keys / 0.75, rtol=1e-6)
    # Without training nothing is dropped.
    kept = scaled_dot_product_attention(q, k, v, dropout=0.25, training=False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(kept), 1 / keys, rtol=1e-6)


def test_one_query_row_in_bfloat16_rounds_where_the_matmul_path_rounds():
    # Under mixed precision a cached decoding step must give what the full pass gives:
    # the single-row path rounds its scores and probabilities to bfloat16 where the
    # batched matmuls do (summing in float32 alone differed in about half the outputs,
    # by up to 8e-3, and moved a trained translator's validation BLEU by 0.16).
    rng = np.random.default_rng(5)
    q, k, v = (
        keras.ops.cast(rng.normal(size=(4, n, 4, 64)).astype("float32"), "bfloat16")
        for n in (6, 40, 40)
    )
    as_numpy = lambda t: keras.ops.convert_to_numpy(keras.ops.cast(t, "float32"))  # noqa: E731
    full = as_numpy(scaled_dot_product_attention(q, k, v, return_attention_scores=True)[0])
    exact = as_numpy(
        scaled_dot_product_attention(*(keras.ops.cast(t, "float32") for t in (q, k, v)))
    )
    for row in range(6):
        one, _ = scaled_dot_product_attention(
            q[:, row : row + 1], k, v, return_attention_scores=True
        )
        one = as_numpy(one)
        if sums_in_float32("bfloat16"):
            assert np.abs(one - full[:, row : row + 1]).max() < 1e-3
        else:
            # The platform's bfloat16 einsum rounds partial sums (TensorFlow on AVX2-only
            # CPUs), which a float32 sum cannot reproduce; the single row must then be no
            # further from float32's result than the full pass is.
            rows = slice(row, row + 1)
            assert np.abs(one - exact[:, rows]).mean() <= np.abs(full - exact)[:, rows].mean()
