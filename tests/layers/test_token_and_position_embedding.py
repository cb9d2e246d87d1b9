import math

import keras
import numpy as np
import pytest

from keras_transformer.layers import TokenAndPositionEmbedding
from keras_transformer.ops import get_keras_mask
from tests.harness import run_layer_test
from tests.layers.test_position_encodings import paper_table

IDS = np.array([[5, 7, 9, 0, 0], [1, 2, 3, 4, 0]], "int32")


# The shared harness costs 5-15 s per layer on JAX (eager 16-bit ops compile one by one):
# one configuration per layer runs there, marked `backend_agnostic`.
@pytest.mark.parametrize(
    "position",
    [pytest.param("sinusoidal", marks=pytest.mark.backend_agnostic), "learned", None],
)
def test_layer_contract(position):
    run_layer_test(
        TokenAndPositionEmbedding,
        {
            "vocabulary_size": 11,
            "embedding_dim": 8,
            "sequence_length": 6,
            "position": position,
            "dropout": 0.1,
        },
        IDS,
        (2, 5, 8),
    )


def test_embedding_is_scaled_by_sqrt_d_plus_positions():
    layer = TokenAndPositionEmbedding(vocabulary_size=11, embedding_dim=8)
    out = np.asarray(layer(IDS))
    table = np.asarray(layer.embeddings)
    np.testing.assert_allclose(out, table[IDS] * math.sqrt(8) + paper_table(5, 8), atol=1e-5)


def test_unscaled_option():
    layer = TokenAndPositionEmbedding(11, 8, position=None, scale_embeddings=False)
    np.testing.assert_allclose(np.asarray(layer(IDS)), np.asarray(layer.embeddings)[IDS])


def test_layer_norm_option_contract():
    run_layer_test(
        TokenAndPositionEmbedding,
        {"vocabulary_size": 11, "embedding_dim": 8, "layer_norm": True, "dropout": 0.1},
        IDS,
        (2, 5, 8),
    )


def test_layer_norm_normalizes_the_sum_like_bert():
    layer = TokenAndPositionEmbedding(
        11,
        8,
        sequence_length=5,
        position="learned",
        scale_embeddings=False,
        layer_norm=True,
        layer_norm_epsilon=1e-12,
    )
    out = np.asarray(layer(IDS))
    total = (
        np.asarray(layer.embeddings)[IDS]
        + np.asarray(layer.position_embedding.position_embeddings)[None, :5]
    )
    mean = total.mean(-1, keepdims=True)
    variance = total.var(-1, keepdims=True)
    np.testing.assert_allclose(out, (total - mean) / np.sqrt(variance + 1e-12), atol=1e-5)
    assert layer.get_config()["layer_norm_epsilon"] == 1e-12


def test_layer_norm_under_mixed_precision_matches_float32():
    reference = TokenAndPositionEmbedding(11, 8, layer_norm=True)
    reference.build(IDS.shape)
    layer = TokenAndPositionEmbedding(11, 8, layer_norm=True, dtype="mixed_bfloat16")
    layer.build(IDS.shape)
    layer.set_weights(reference.get_weights())
    out = layer(IDS)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    # Normalized in float32, rounded once to bfloat16 (8 bits of mantissa) at the end.
    expected = np.asarray(reference(IDS))
    np.testing.assert_allclose(np.asarray(out, "float32"), expected, rtol=2**-7, atol=2**-7)


def test_default_initializer_gives_unit_scale_embeddings():
    layer = TokenAndPositionEmbedding(vocabulary_size=2000, embedding_dim=256, position=None)
    layer.build((None, None))
    scaled_std = np.asarray(layer.embeddings).std() * math.sqrt(256)
    assert 0.95 < scaled_std < 1.05


def test_attend_is_tied_to_the_embedding(rng):
    layer = TokenAndPositionEmbedding(vocabulary_size=11, embedding_dim=8)
    hidden = layer(IDS)
    logits = np.asarray(layer.attend(hidden))
    np.testing.assert_allclose(
        logits, np.asarray(hidden) @ np.asarray(layer.embeddings).T, rtol=1e-5, atol=1e-5
    )


def test_mask_is_produced_and_propagates():
    layer = TokenAndPositionEmbedding(vocabulary_size=11, embedding_dim=8)
    out = layer(IDS)
    np.testing.assert_array_equal(np.asarray(get_keras_mask(out)), IDS != 0)
    inputs = keras.Input((None,), dtype="int32")
    x = TokenAndPositionEmbedding(11, 8)(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, pooled)
    ids = np.array([[3, 4, 0, 0]])
    embedded = np.asarray(model.layers[1](ids))[0, :2].mean(0)
    np.testing.assert_allclose(model(ids)[0], embedded, rtol=1e-5, atol=1e-6)
    assert get_keras_mask(TokenAndPositionEmbedding(11, 8, mask_zero=False)(IDS)) is None


def test_start_index_shifts_positions():
    layer = TokenAndPositionEmbedding(vocabulary_size=11, embedding_dim=8)
    full = np.asarray(layer(np.array([[1, 2, 3, 4]])))
    last = np.asarray(layer(np.array([[4]]), start_index=3))
    np.testing.assert_allclose(last[0, 0], full[0, 3], atol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match='`position="learned"` needs `sequence_length`'):
        TokenAndPositionEmbedding(10, 8, position="learned")
    with pytest.raises(
        ValueError, match="`position` must be one of 'sinusoidal', 'learned', 'rotary', 'alibi'"
    ):
        TokenAndPositionEmbedding(10, 8, position="relative")
    with pytest.raises(ValueError, match="`vocabulary_size` must be a positive integer"):
        TokenAndPositionEmbedding(0, 8)
    with pytest.raises(ValueError, match="`layer_norm` must be True or False"):
        TokenAndPositionEmbedding(10, 8, layer_norm="yes")
    with pytest.raises(ValueError, match="`layer_norm_epsilon` must be a positive float"):
        TokenAndPositionEmbedding(10, 8, layer_norm=True, layer_norm_epsilon=0)
    with pytest.raises(
        ValueError, match=r"`inputs` must have rank 2.*Received: inputs.shape=\(2, 5, 1\)"
    ):
        TokenAndPositionEmbedding(10, 8)(IDS[..., None])
    layer = TokenAndPositionEmbedding(10, 8, sequence_length=4, position="learned")
    with pytest.raises(ValueError, match="`sequence_length=4`"):
        layer(IDS)
