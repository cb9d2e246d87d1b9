"""Parity with `keras.layers.MultiHeadAttention` and keras-hub's Transformer blocks.

Our layers get random weights; each is copied sub-layer by sub-layer into the
other implementation, which must then give the same outputs (float32, 1e-5).
"""

import keras
import numpy as np
import pytest
from reference_utils import (
    NORMS,
    ZEROS,
    assert_close,
    built,
    copy_weights,
    padding_mask,
    random_inputs,
    to_numpy,
)

from keras_transformer.layers import (
    MultiHeadAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

keras_hub = pytest.importorskip("keras_hub")

pytestmark = pytest.mark.backend_agnostic

BATCH, TARGET, SOURCE, WIDTH, HEADS, FFN_DIM = 2, 6, 5, 16, 4, 32
EPSILON = 1e-5


def _copy_attention(ours, theirs):
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
        copy_weights(getattr(ours, name), getattr(theirs, "_" + name))


def _attention_pair(query_shape, value_shape, key_shape=None):
    ours = built(MultiHeadAttention(num_heads=HEADS, **ZEROS), query_shape, value_shape, key_shape)
    theirs = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=WIDTH // HEADS, **ZEROS)
    theirs.build(query_shape, value_shape, key_shape)
    _copy_attention(ours, theirs)
    return ours, theirs


def test_mha_self_attention_matches_keras():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    ours, theirs = _attention_pair(x.shape, x.shape)
    assert_close(ours(x, x), theirs(x, x))


def test_mha_cross_attention_with_separate_key_matches_keras():
    query = random_inputs(0, BATCH, TARGET, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, 12)
    key = random_inputs(2, BATCH, SOURCE, 10)
    ours, theirs = _attention_pair(query.shape, value.shape, key.shape)
    assert_close(ours(query, value, key=key), theirs(query, value, key=key))


def test_mha_attention_mask_matches_keras():
    query = random_inputs(0, BATCH, TARGET, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, WIDTH)
    mask = np.random.default_rng(2).random((BATCH, TARGET, SOURCE)) < 0.6
    mask[:, :, 3] = True  # Keras spreads fully masked rows uniformly; we return zeros
    ours, theirs = _attention_pair(query.shape, value.shape)
    assert_close(ours(query, value, attention_mask=mask), theirs(query, value, attention_mask=mask))


def test_mha_use_causal_mask_matches_keras():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    ours, theirs = _attention_pair(x.shape, x.shape)
    assert_close(ours(x, x, use_causal_mask=True), theirs(x, x, use_causal_mask=True))


def test_mha_causal_and_padding_mask_match_keras():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    mask = np.broadcast_to(padding_mask([TARGET, 4], TARGET)[:, None, :], (BATCH, TARGET, TARGET))
    ours, theirs = _attention_pair(x.shape, x.shape)
    expected = to_numpy(theirs(x, x, attention_mask=mask, use_causal_mask=True))
    assert_close(ours(x, x, attention_mask=mask, use_causal_mask=True), expected)


# --- keras-hub TransformerEncoder / TransformerDecoder ----------------------------------


def _copy_block(ours, theirs):
    """Copies what encoder and decoder blocks both have: self-attention and feed-forward."""
    _copy_attention(ours.self_attention, theirs._self_attention_layer)
    copy_weights(ours.self_attention_layer_norm, theirs._self_attention_layer_norm)
    copy_weights(ours.feed_forward.intermediate_dense, theirs._feedforward_intermediate_dense)
    copy_weights(ours.feed_forward.output_dense, theirs._feedforward_output_dense)
    copy_weights(ours.feed_forward_layer_norm, theirs._feedforward_layer_norm)


def _block_kwargs(norm_first):
    return dict(
        num_heads=HEADS,
        intermediate_dim=FFN_DIM,
        norm_first=norm_first,
        layer_norm_epsilon=EPSILON,
        activation="relu",
        **ZEROS,
    )


def _hub_kwargs(norm_first):
    return dict(
        intermediate_dim=FFN_DIM,
        num_heads=HEADS,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=EPSILON,
        normalize_first=norm_first,
        **ZEROS,
    )


def _encoder_pair(norm_first, x):
    ours = built(TransformerEncoderBlock(**_block_kwargs(norm_first)), x.shape, seed=1)
    theirs = keras_hub.layers.TransformerEncoder(**_hub_kwargs(norm_first))
    theirs.build(x.shape)
    _copy_block(ours, theirs)
    return ours, theirs


@NORMS
def test_encoder_block_matches_keras_hub(norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    pad = padding_mask([TARGET, 4], TARGET)
    ours, theirs = _encoder_pair(norm_first, x)
    expected = to_numpy(theirs(x, padding_mask=pad))
    outputs = to_numpy(ours(x, padding_mask=pad))
    assert_close(outputs[pad], expected[pad])


def _decoder_pair(norm_first, x, memory):
    ours = TransformerDecoderBlock(**_block_kwargs(norm_first))
    built(ours, x.shape, memory.shape, seed=2)
    theirs = keras_hub.layers.TransformerDecoder(**_hub_kwargs(norm_first))
    theirs.build(x.shape, memory.shape)
    _copy_block(ours, theirs)
    _copy_attention(ours.cross_attention_layer, theirs._cross_attention_layer)
    copy_weights(ours.cross_attention_layer_norm, theirs._cross_attention_layer_norm)
    return ours, theirs


@NORMS
def test_decoder_block_matches_keras_hub(norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    decoder_pad = padding_mask([TARGET, 4], TARGET)
    encoder_pad = padding_mask([3, SOURCE], SOURCE)
    ours, theirs = _decoder_pair(norm_first, x, memory)
    kwargs = dict(
        decoder_padding_mask=decoder_pad, encoder_padding_mask=encoder_pad, use_causal_mask=True
    )
    expected = to_numpy(theirs(x, memory, **kwargs))
    outputs = to_numpy(ours(x, memory, **kwargs))
    assert_close(outputs[decoder_pad], expected[decoder_pad])


@NORMS
def test_decoder_block_without_masks_matches_keras_hub(norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    ours, theirs = _decoder_pair(norm_first, x, memory)
    assert_close(ours(x, memory), theirs(x, memory))
