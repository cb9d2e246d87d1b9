import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import MultiHeadAttention
from keras_transformer.ops import get_keras_mask
from tests.harness import run_layer_test

B, T, S, D = 2, 5, 7, 16


def test_self_attention_layer_contract(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 4, "dropout": 0.1, "seed": 3},
        {"query": x, "value": x},
        (B, T, D),
        call_kwargs={"use_causal_mask": True},
        expected_num_trainable_weights=8,
    )


def test_cross_attention_layer_contract(rng):
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 6, "value_dim": 5, "output_dim": 9},
        {
            "query": rng.standard_normal((B, T, D)).astype("float32"),
            "value": rng.standard_normal((B, S, 12)).astype("float32"),
        },
        (B, T, 9),
    )


def test_grouped_query_attention_shapes(rng):
    layer = MultiHeadAttention(num_heads=4, num_key_value_heads=2)
    x = rng.standard_normal((B, T, D)).astype("float32")
    out, scores = layer(x, x, return_attention_scores=True)
    assert out.shape == (B, T, D)
    assert scores.shape == (B, 4, T, T)
    assert layer.query_dense.kernel.shape == (D, 4, 4)
    assert layer.key_dense.kernel.shape == (D, 2, 4)
    assert layer.value_dense.kernel.shape == (D, 2, 4)


def test_key_dim_defaults_to_width_over_heads():
    layer = MultiHeadAttention(num_heads=4)
    layer.build((None, T, 32))
    assert layer.query_dense.kernel.shape == (32, 4, 8)


def test_fused_and_separate_projections_agree(rng):
    # Self-attention takes the fused QKV path; passing an equal copy as `value`
    # takes the three-projection path. Both must compute the same thing.
    # The same *tensor* twice: two NumPy arguments become two tensors, and then both calls
    # took the three-projection path (the test compared that path with itself).
    layer = MultiHeadAttention(num_heads=4)
    x = ops.convert_to_tensor(rng.standard_normal((B, T, D)).astype("float32"))
    calls = []
    project = layer._project_self_attention
    layer._project_self_attention = lambda h: calls.append(1) or project(h)
    fused = layer(x, x)
    assert calls == [1]
    separate = layer(x, ops.convert_to_tensor(ops.convert_to_numpy(x)))
    assert calls == [1]
    np.testing.assert_allclose(fused, separate, rtol=1e-5, atol=1e-6)


def test_scores_sum_to_one_and_respect_mask(rng):
    layer = MultiHeadAttention(num_heads=2)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = np.ones((B, T, T), bool)
    mask[:, :, -2:] = False
    _, scores = layer(x, x, attention_mask=mask, return_attention_scores=True)
    scores = np.asarray(scores)
    np.testing.assert_allclose(scores.sum(-1), 1.0, rtol=1e-5)
    assert np.all(scores[..., -2:] == 0)


def test_keras_masks_are_honoured(rng):
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 0]])
    embedding = keras.layers.Embedding(10, D, mask_zero=True)
    x = embedding(ids)
    layer = MultiHeadAttention(num_heads=2)
    _, scores = layer(x, x, return_attention_scores=True)
    scores = np.asarray(scores)
    assert np.all(scores[0, :, :3, 3:] == 0)  # padded keys get no weight
    assert np.all(scores[0, :, 3:, :] == 0)  # padded queries are fully masked → zeros
    # The query's Keras mask propagates to the output.
    out = layer(x, x)
    np.testing.assert_array_equal(np.asarray(get_keras_mask(out)), ids != 0)


def test_keras_mask_in_functional_model():
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, D, mask_zero=True)(ids)
    y = MultiHeadAttention(num_heads=2)(x, x)
    pooled = keras.layers.GlobalAveragePooling1D()(y)
    model = keras.Model(ids, pooled)
    a = model(np.array([[1, 2, 3, 0, 0]]))
    b = model(np.array([[1, 2, 3, 0, 0, 0, 0, 0]]))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_cache_returns_updated_cache(rng):
    layer = MultiHeadAttention(num_heads=2, num_key_value_heads=1)
    x = rng.standard_normal((B, 1, D)).astype("float32")
    cache = np.zeros((B, 2, 6, 1, 8), "float32")
    out, new_cache = layer(x, x, cache=cache, cache_update_index=2)
    new_cache = np.asarray(new_cache)
    assert out.shape == (B, 1, D)
    assert np.any(new_cache[:, :, 2] != 0)
    assert np.all(np.delete(new_cache, 2, axis=2) == 0)
    np.testing.assert_allclose(new_cache[:, 0, 2:3], np.asarray(layer.key_dense(x)), atol=1e-6)


def test_precomputed_cache_equals_direct_cross_attention(rng):
    layer = MultiHeadAttention(num_heads=2)
    q = rng.standard_normal((B, T, D)).astype("float32")
    memory = rng.standard_normal((B, S, D)).astype("float32")
    direct = layer(q, memory)
    cache = layer.compute_cache(memory)
    assert cache.shape == (B, 2, S, 2, 8)
    # A precomputed cache is read, not returned: the output alone comes back.
    cached = layer(q, None, cache=cache)
    np.testing.assert_allclose(direct, cached, rtol=1e-5, atol=1e-6)


def test_rows_sharing_a_precomputed_cache_row(rng):
    # One query row per step for 3 copies of each of B sources (beams), against a cache
    # of one row per source: as the cache tiled per copy, with each source's key mask.
    layer = MultiHeadAttention(num_heads=2)
    memory = rng.standard_normal((B, S, D)).astype("float32")
    key_mask = np.arange(S)[None, :] < np.array([[S], [3]])
    q = rng.standard_normal((B * 3, 1, D)).astype("float32")
    cache = layer.compute_cache(memory)
    shared = layer(q, None, cache=cache, key_mask=key_mask)
    tiled = layer(q, None, cache=ops.repeat(cache, 3, axis=0), key_mask=np.repeat(key_mask, 3, 0))
    np.testing.assert_allclose(
        ops.convert_to_numpy(shared), ops.convert_to_numpy(tiled), rtol=1e-6, atol=1e-6
    )


def test_flash_attention_is_stored_in_config():
    layer = MultiHeadAttention(num_heads=2, flash_attention=False)
    assert layer.get_config()["flash_attention"] is False
    assert MultiHeadAttention.from_config(layer.get_config()).flash_attention is False


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_heads": 0}, "`num_heads` must be a positive integer"),
        ({"num_heads": 4, "num_key_value_heads": 3}, "`num_key_value_heads`.*must divide"),
        ({"num_heads": 2, "dropout": 1.5}, r"`dropout` must be a float in \[0, 1\)"),
        ({"num_heads": 2, "key_dim": -1}, "`key_dim` must be a positive integer"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_heads_not_dividing_width_is_an_error():
    layer = MultiHeadAttention(num_heads=3)
    with pytest.raises(ValueError, match=r"\(16\) is not divisible by `num_heads` \(3\)"):
        layer(np.zeros((1, 2, 16)), np.zeros((1, 2, 16)))


def test_mask_of_wrong_shape_is_an_error(rng):
    layer = MultiHeadAttention(num_heads=2)
    x = rng.standard_normal((B, T, D)).astype("float32")
    with pytest.raises(
        ValueError, match="`attention_mask` must broadcast to .* key axis has length 4"
    ):
        layer(x, x, attention_mask=np.ones((B, T, 4), bool))
    with pytest.raises(ValueError, match="`attention_mask` must have rank 2 or 3 or 4"):
        layer(x, x, attention_mask=np.ones((B, 1, 1, 1, T, T), bool))


def test_wrong_input_rank_is_an_error():
    layer = MultiHeadAttention(num_heads=2)
    with pytest.raises(
        ValueError, match=r"`query` must have rank 3.*Received: query.shape=\(2, 16\)"
    ):
        layer(np.zeros((2, 16)), np.zeros((2, 16)))


def test_value_is_required_without_cache(rng):
    layer = MultiHeadAttention(num_heads=2)
    with pytest.raises(ValueError, match="`value` is required"):
        layer(ops.zeros((1, 2, 8)), None)
