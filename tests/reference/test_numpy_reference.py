"""The layers against the float64 NumPy reference of the paper, with the same weights."""

import keras
import numpy as np
import pytest
from numpy_transformer import (
    attention,
    causal_mask,
    feed_forward,
    layer_norm,
    multi_head_attention,
    padding_mask_to_attention,
    sinusoidal_position_encoding,
)
from reference_utils import (
    NORMS,
    ZERO_EMBEDDINGS,
    ZEROS,
    assert_close,
    attention_weights,
    built,
    decoder_block_reference,
    encoder_block_reference,
    feed_forward_weights,
    layer_norm_weights,
    padding_mask,
    random_inputs,
    randomize_weights,
    to_numpy,
)

from keras_transformer.layers import (
    FeedForward,
    MultiHeadAttention,
    SinusoidalPositionEncoding,
    TokenAndPositionEmbedding,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)
from keras_transformer.ops import scaled_dot_product_attention

pytestmark = pytest.mark.backend_agnostic

BATCH, TARGET, SOURCE, WIDTH, HEADS, FFN_DIM = 2, 6, 5, 16, 4, 32
# Far from Keras' 1e-3 default and the blocks' 1e-6, so a lost epsilon would show.
EPSILON = 1e-2


# --- scaled dot-product attention ------------------------------------------------------


def _reference_sdpa(q, k, v, mask=None):
    """Our `(B, L, heads, D)` layout → the reference's `(B, heads, L, D)`, and back."""
    heads, kv_heads = q.shape[2], k.shape[2]
    k = np.repeat(k, heads // kv_heads, axis=2)  # kv head j serves query heads j*g .. j*g+g-1
    v = np.repeat(v, heads // kv_heads, axis=2)
    q, k, v = (np.transpose(t, (0, 2, 1, 3)).astype(np.float64) for t in (q, k, v))
    if mask is not None and mask.ndim == 3:
        mask = mask[:, None]
    outputs, probs = attention(q, k, v, mask)
    return np.transpose(outputs, (0, 2, 1, 3)), probs


def _qkv(kv_heads=HEADS, head_dim=WIDTH // HEADS):
    return (
        random_inputs(0, BATCH, TARGET, HEADS, head_dim),
        random_inputs(1, BATCH, SOURCE, kv_heads, head_dim),
        random_inputs(2, BATCH, SOURCE, kv_heads, head_dim),
    )


def _mask_with_fully_masked_row():
    mask = np.random.default_rng(3).random((BATCH, TARGET, SOURCE)) < 0.6
    mask[0, 2, :] = False  # nothing to attend to
    mask[1, :, 0] = True  # every other row attends somewhere
    mask[0, [0, 1, 3, 4, 5], 0] = True
    return mask


@pytest.mark.parametrize("explicit_path", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("kv_heads", [HEADS, 2, 1], ids=["mha", "gqa2", "mqa"])
def test_sdpa_with_mask_matches_reference(explicit_path, kv_heads):
    q, k, v = _qkv(kv_heads)
    mask = _mask_with_fully_masked_row()
    expected, expected_probs = _reference_sdpa(q, k, v, mask)
    result = scaled_dot_product_attention(q, k, v, mask=mask, return_attention_scores=explicit_path)
    if explicit_path:
        result, probs = result
        assert_close(probs, expected_probs)
    assert_close(result, expected)
    assert np.all(to_numpy(result)[0, 2] == 0.0)


@pytest.mark.parametrize("explicit_path", [False, True], ids=["fused", "explicit"])
def test_sdpa_causal_matches_reference(explicit_path):
    q, k, v = _qkv()
    expected, expected_probs = _reference_sdpa(q, k, v, causal_mask(TARGET, SOURCE)[None])
    result = scaled_dot_product_attention(
        q, k, v, is_causal=True, return_attention_scores=explicit_path
    )
    if explicit_path:
        result, probs = result
        assert_close(probs, expected_probs)
    assert_close(result, expected)


def test_sdpa_causal_and_mask_combine():
    q, k, v = _qkv(kv_heads=2)
    mask = _mask_with_fully_masked_row()
    expected, _ = _reference_sdpa(q, k, v, mask & causal_mask(TARGET, SOURCE)[None])
    assert_close(scaled_dot_product_attention(q, k, v, mask=mask, is_causal=True), expected)


# --- multi-head attention ---------------------------------------------------------------


def _mha(kv_heads=None, seed=0, **call_shapes):
    layer = MultiHeadAttention(num_heads=HEADS, num_key_value_heads=kv_heads, **ZEROS)
    layer.build(**call_shapes)
    randomize_weights(layer, seed)
    return layer


@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
def test_mha_self_attention_matches_reference(kv_heads):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    mask = padding_mask([TARGET, 3], TARGET)[:, None, :] & causal_mask(TARGET)[None]
    layer = _mha(kv_heads, query_shape=x.shape, value_shape=x.shape)
    expected = multi_head_attention(x, x, attention_weights(layer), mask=mask)
    assert_close(layer(x, x, attention_mask=mask), expected)


@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
def test_mha_cross_attention_matches_reference(kv_heads):
    query = random_inputs(0, BATCH, TARGET, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, 12)
    key = random_inputs(2, BATCH, SOURCE, 10)
    mask = np.random.default_rng(4).random((BATCH, TARGET, SOURCE)) < 0.7
    mask[:, :, 0] = True
    layer = _mha(kv_heads, query_shape=query.shape, value_shape=value.shape, key_shape=key.shape)
    expected = multi_head_attention(query, value, attention_weights(layer), key=key, mask=mask)
    assert_close(layer(query, value, key=key, attention_mask=mask), expected)


def test_mha_use_causal_mask_matches_reference():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    layer = _mha(query_shape=x.shape, value_shape=x.shape)
    expected = multi_head_attention(x, x, attention_weights(layer), mask=causal_mask(TARGET))
    assert_close(layer(x, x, use_causal_mask=True), expected)


# --- position encodings and embeddings --------------------------------------------------


def test_reference_position_table_follows_the_paper():
    table = sinusoidal_position_encoding(3, 4)
    pos = np.arange(3.0)
    np.testing.assert_allclose(table[:, 0], np.sin(pos))
    np.testing.assert_allclose(table[:, 1], np.cos(pos))
    np.testing.assert_allclose(table[:, 2], np.sin(pos / 100.0))
    np.testing.assert_allclose(table[:, 3], np.cos(pos / 100.0))


def test_sinusoidal_table_short_matches_reference():
    outputs = SinusoidalPositionEncoding()(np.zeros((2, 50, 16), "float32"))
    assert tuple(outputs.shape) == (2, 50, 16)
    expected = sinusoidal_position_encoding(50, 16)
    assert_close(outputs[0], expected)
    assert_close(outputs[1], expected)


def _float32_angle_tolerance(length, width):
    """What float32 can promise: the angle `pos·ω` itself is only known to about one ulp.

    At position ~1000 the float32 spacing of the angle is 6e-5, so no float32 table is
    within 1e-5 of the exact one there; allow two ulps of the angle (plus 1e-6).
    """
    pos = np.arange(length, dtype=np.float64)[:, None]
    dims = np.arange(width)
    omega = 10000.0 ** (-(dims - dims % 2) / width)[None, :]
    return 1e-6 + 2.0 * np.spacing(np.float32(pos * omega)).astype(np.float64)


def test_sinusoidal_table_long_matches_reference():
    outputs = to_numpy(SinusoidalPositionEncoding()(np.zeros((1, 1024, 64), "float32")))[0]
    expected = sinusoidal_position_encoding(1024, 64)
    error = np.abs(outputs - expected)
    assert np.all(error <= _float32_angle_tolerance(1024, 64)), error.max()
    # Wherever float32 angles are exact enough (positions < 128), the paper's 1e-5 holds.
    assert_close(outputs[:128], expected[:128])


def test_sinusoidal_start_index_matches_reference():
    outputs = SinusoidalPositionEncoding()(np.zeros((1, 4, 16), "float32"), start_index=9)
    assert_close(outputs[0], sinusoidal_position_encoding(4, 16, start=9))


@pytest.mark.parametrize(
    "policy, max_error",
    [("mixed_bfloat16", 4e-3), ("mixed_float16", 5e-4)],
    ids=["bf16", "f16"],
)
def test_sinusoidal_table_in_16_bit_is_the_rounded_float32_table(policy, max_error):
    layer = SinusoidalPositionEncoding(dtype=policy)
    outputs = layer(np.zeros((1, 1024, 64), "float32"))
    assert keras.backend.standardize_dtype(outputs.dtype) == policy.split("_")[1]
    error = np.abs(to_numpy(outputs)[0] - sinusoidal_position_encoding(1024, 64))
    # One rounding of values in [-1, 1] to the 16-bit type; angles computed in 16 bits
    # would be off by whole radians (errors up to 2).
    assert error.max() <= max_error, error.max()


def _token_embedding(position="sinusoidal", scale=True):
    layer = TokenAndPositionEmbedding(
        vocabulary_size=11,
        embedding_dim=WIDTH,
        position=position,
        scale_embeddings=scale,
        **ZERO_EMBEDDINGS,
    )
    return built(layer, (None, None), seed=5)


def test_token_and_position_embedding_matches_reference():
    ids = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 0, 0, 0]], "int32")
    layer = _token_embedding()
    table = to_numpy(layer.embeddings)
    expected = table[ids] * np.sqrt(WIDTH) + sinusoidal_position_encoding(6, WIDTH)[None]
    assert_close(layer(ids), expected)


def test_token_and_position_embedding_start_index_matches_reference():
    ids = np.array([[7, 8]], "int32")
    layer = _token_embedding()
    expected = to_numpy(layer.embeddings)[ids] * np.sqrt(WIDTH)
    expected = expected + sinusoidal_position_encoding(2, WIDTH, start=4)[None]
    assert_close(layer(ids, start_index=4), expected)


def test_token_embedding_without_positions_or_scale():
    ids = np.array([[3, 1, 4]], "int32")
    layer = _token_embedding(position=None, scale=False)
    assert_close(layer(ids), to_numpy(layer.embeddings)[ids])


def test_attend_is_the_tied_output_projection():
    layer = _token_embedding()
    hidden = random_inputs(6, BATCH, TARGET, WIDTH)
    expected = hidden.astype(np.float64) @ to_numpy(layer.embeddings).T
    logits = layer.attend(hidden)
    assert tuple(logits.shape) == (BATCH, TARGET, 11)
    assert_close(logits, expected)


# --- feed-forward network and blocks ----------------------------------------------------


def test_feed_forward_matches_reference():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    layer = built(FeedForward(FFN_DIM, **ZEROS), x.shape, seed=1)
    w = feed_forward_weights(layer)
    assert_close(layer(x), feed_forward(x, w.w1, w.b1, w.w2, w.b2))


def test_reference_layer_norm_matches_keras():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    norm = built(keras.layers.LayerNormalization(epsilon=EPSILON), x.shape, seed=2)
    w = layer_norm_weights(norm)
    assert_close(norm(x), layer_norm(x, w.gamma, w.beta, EPSILON))


def _block_kwargs(norm_first, kv_heads=None):
    return dict(
        num_heads=HEADS,
        intermediate_dim=FFN_DIM,
        norm_first=norm_first,
        layer_norm_epsilon=EPSILON,
        num_key_value_heads=kv_heads,
        **ZEROS,
    )


@NORMS
@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
def test_encoder_block_matches_reference(norm_first, kv_heads):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    pad = padding_mask([TARGET, 3], TARGET)
    block = built(TransformerEncoderBlock(**_block_kwargs(norm_first, kv_heads)), x.shape, seed=7)
    mask = padding_mask_to_attention(pad)
    expected = encoder_block_reference(block, x, EPSILON, mask, norm_first)
    assert_close(block(x, padding_mask=pad), expected)


@NORMS
@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
def test_decoder_block_matches_reference(norm_first, kv_heads):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    decoder_pad = padding_mask([TARGET, 4], TARGET)
    encoder_pad = padding_mask([3, SOURCE], SOURCE)
    block = TransformerDecoderBlock(**_block_kwargs(norm_first, kv_heads))
    built(block, x.shape, memory.shape, seed=8)
    expected = decoder_block_reference(
        block,
        x,
        memory,
        EPSILON,
        padding_mask_to_attention(decoder_pad),
        padding_mask_to_attention(encoder_pad),
        norm_first,
    )
    outputs = block(x, memory, decoder_padding_mask=decoder_pad, encoder_padding_mask=encoder_pad)
    assert_close(outputs, expected)


@NORMS
def test_encoder_stack_matches_reference(norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    pad = padding_mask([TARGET, 2], TARGET)
    stack = built(TransformerEncoder(num_layers=2, **_block_kwargs(norm_first)), x.shape, seed=9)
    expected = x.astype(np.float64)
    mask = padding_mask_to_attention(pad)
    for block in stack.blocks:
        expected = encoder_block_reference(block, expected, EPSILON, mask, norm_first)
    if norm_first:  # the pre-norm stack ends with one more layer norm
        w = layer_norm_weights(stack.final_layer_norm)
        expected = layer_norm(expected, w.gamma, w.beta, EPSILON)
    assert_close(stack(x, padding_mask=pad), expected)


@NORMS
def test_decoder_stack_matches_reference(norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    stack = TransformerDecoder(num_layers=2, **_block_kwargs(norm_first))
    built(stack, x.shape, memory.shape, seed=10)
    expected = x.astype(np.float64)
    for block in stack.blocks:
        expected = decoder_block_reference(block, expected, memory, EPSILON, norm_first=norm_first)
    if norm_first:
        w = layer_norm_weights(stack.final_layer_norm)
        expected = layer_norm(expected, w.gamma, w.beta, EPSILON)
    assert_close(stack(x, memory), expected)
