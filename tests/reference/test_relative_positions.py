"""Rotary and ALiBi positions: against their papers' formulas and keras-hub, and the
invariances they must keep (relative scores, cached decoding, padding)."""

import os
import tempfile

import keras
import numpy as np
import pytest
from keras import ops
from reference_utils import ZEROS, assert_close, built, random_inputs, to_numpy

from keras_transformer.layers import MultiHeadAttention, TransformerEncoderBlock
from keras_transformer.ops import alibi_bias, alibi_slopes, apply_rotary_embedding
from tests import tiny_models
from tests.harness import run_layer_test

BATCH, LENGTH, WIDTH, HEADS, HEAD_DIM = 2, 6, 16, 4, 4
MAX_LENGTH = LENGTH + 2
ALL_POSITIONS = ["sinusoidal", "learned", "rotary", "alibi", None]
RELATIVE = pytest.mark.parametrize("position", ["rotary", "alibi"])
agnostic = pytest.mark.backend_agnostic


def su_rotary(x, start=0, base=10000.0):
    """Su et al., 2021, eq. 34: pairs of neighbouring features `(2i, 2i+1)` turned by
    `m * base^(-2i/d)`, in float64."""
    x = np.asarray(x, np.float64)
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)
    m = start + np.arange(x.shape[1])
    angles = m[:, None] * theta[None, :]  # (T, d/2)
    cos, sin = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = odd * cos + even * sin
    return out


# Our layout pairs feature i with i + d/2; Su et al.'s pairs 2i with 2i + 1.
_INTERLEAVE = np.stack([np.arange(HEAD_DIM // 2), np.arange(HEAD_DIM // 2) + HEAD_DIM // 2], -1)
INTERLEAVE = _INTERLEAVE.reshape(-1)


@agnostic
def test_rotary_matches_su_et_al_and_keras_hub():
    x = random_inputs(0, BATCH, LENGTH, HEADS, HEAD_DIM).astype("float32")
    ours = to_numpy(apply_rotary_embedding(x, start_index=5))
    # The same rotation once the features are listed in Su et al.'s order.
    assert_close(ours[..., INTERLEAVE], su_rotary(x[..., INTERLEAVE], start=5))
    keras_hub = pytest.importorskip("keras_hub")
    theirs = keras_hub.layers.RotaryEmbedding()(x, start_index=5)
    assert_close(ours, theirs)


@agnostic
def test_rotary_scores_depend_only_on_the_offset():
    q = random_inputs(1, 1, 1, HEADS, 8)
    k = random_inputs(2, 1, 1, HEADS, 8)

    def scores(m, n):
        rotated_q = apply_rotary_embedding(q, start_index=m)
        rotated_k = apply_rotary_embedding(k, start_index=n)
        return to_numpy(ops.sum(rotated_q * rotated_k, axis=-1))

    for offset in (0, 3, -7):
        base = scores(10 + offset, 10)
        for shift in (-10, 1, 250):
            assert_close(scores(10 + offset + shift, 10 + shift), base, atol=1e-4)
    assert np.abs(scores(13, 10) - scores(10, 10)).max() > 1e-2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rotary_angles_stay_float32_under_mixed_precision(dtype):
    # Position 3001 in 16 bits would be 3000 or 3008: every angle off by radians.
    x = random_inputs(3, 1, 2, HEADS, HEAD_DIM)
    ours = to_numpy(apply_rotary_embedding(ops.cast(x, dtype), start_index=3001))
    expected = su_rotary(x[..., INTERLEAVE], start=3001)
    assert_close(ours[..., INTERLEAVE], expected, atol=0.05, rtol=0.02)


@agnostic
def test_alibi_slopes_are_the_papers():
    # Press et al., 2022, section 3: 2^(-8/n) * ratio 2^(-8/n) for n = 8 heads ...
    assert alibi_slopes(8) == [2.0**-i for i in range(1, 9)]
    # ... and for 6: the 4-head slopes, then every other one of the 8-head slopes.
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(1) == [2.0**-8]
    bias = to_numpy(alibi_bias(6, 3, 5, start_index=2))
    distance = np.abs((2 + np.arange(3))[:, None] - np.arange(5)[None, :])
    assert_close(bias[0], -np.array(alibi_slopes(6))[:, None, None] * distance)


@agnostic
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_alibi_scores_with_padding(causal):
    # With a zero query projection every logit from Q Kᵀ is 0, so the scores are the
    # softmax of the bias alone, masked by padding (and causality).
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    layer = built(MultiHeadAttention(HEADS, relative_position="alibi", **ZEROS), x.shape, x.shape)
    layer.query_dense.kernel.assign(np.zeros(layer.query_dense.kernel.shape, "float32"))
    layer.query_dense.bias.assign(np.zeros(layer.query_dense.bias.shape, "float32"))
    lengths = np.array([LENGTH, 4])
    real = np.arange(LENGTH)[None, :] < lengths[:, None]
    _, scores = layer(
        x, x, attention_mask=real[:, None, :], use_causal_mask=causal, return_attention_scores=True
    )
    distance = np.abs(np.arange(LENGTH)[:, None] - np.arange(LENGTH)[None, :])
    logits = -np.array(alibi_slopes(HEADS))[None, :, None, None] * distance[None, None]
    visible = real[:, None, None, :] & (np.tril(np.ones((LENGTH, LENGTH), bool)) | (not causal))
    logits = np.where(visible, logits, -np.inf)
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    assert_close(scores, expected / expected.sum(-1, keepdims=True))


@RELATIVE
# Grouped-query attention exercises every path of plain attention, and more: on JAX
# (where each new shape compiles) it alone runs.
@pytest.mark.parametrize("kv_heads", [None, pytest.param(2, marks=agnostic)], ids=["mha", "gqa"])
def test_cached_decoding_matches_causal_pass(position, kv_heads):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    layer = MultiHeadAttention(
        HEADS, num_key_value_heads=kv_heads, relative_position=position, **ZEROS
    )
    built(layer, x.shape, x.shape)
    expected = layer(x, x, use_causal_mask=True)
    cache = ops.zeros((BATCH, 2, MAX_LENGTH, kv_heads or HEADS, HEAD_DIM))
    outputs = []
    for start, end in ((0, 3), (3, 4), (4, 5), (5, 6)):
        index = ops.convert_to_tensor(start, "int32") if start else start
        out, cache = layer(x[:, start:end], x[:, start:end], cache=cache, cache_update_index=index)
        outputs.append(to_numpy(out))
    assert_close(np.concatenate(outputs, axis=1), expected)


@RELATIVE
def test_language_model_decode_steps_match_full_pass(position):
    lm = tiny_models.lm(13, num_layers=2, position=position, dropout=0.0)
    ids = np.random.default_rng(0).integers(1, 13, (BATCH, LENGTH)).astype("int32")
    cache = lm.initial_cache(BATCH, MAX_LENGTH)
    logits, cache = lm.decode_step(ids[:, :3], cache, 0)
    outputs = [to_numpy(logits)]
    for t in range(3, LENGTH):
        logits, cache = lm.decode_step(ids[:, t : t + 1], cache, t)
        outputs.append(to_numpy(logits))
    assert_close(np.concatenate(outputs, axis=1), lm(ids), atol=1e-4)


@pytest.mark.parametrize("position", ALL_POSITIONS)
def test_padding_does_not_change_real_positions(position):
    model = tiny_models.classifier(13, 2, position=position, max_sequence_length=16, dropout=0.0)
    ids = np.random.default_rng(1).integers(1, 13, (BATCH, LENGTH)).astype("int32")
    padded = np.concatenate([ids, np.zeros((BATCH, 3), "int32")], axis=1)
    assert_close(to_numpy(model.encoder(padded))[:, :LENGTH], model.encoder(ids), atol=1e-5)


@RELATIVE
def test_attention_layer_contract(rng, position):
    x = rng.standard_normal((BATCH, LENGTH, WIDTH)).astype("float32")
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": HEADS, "num_key_value_heads": 2, "relative_position": position},
        {"query": x, "value": x},
        (BATCH, LENGTH, WIDTH),
        call_kwargs={"use_causal_mask": True},
        run_quantization=False,
    )


@RELATIVE
def test_block_contract(rng, position):
    x = rng.standard_normal((BATCH, LENGTH, WIDTH)).astype("float32")
    layer = run_layer_test(
        TransformerEncoderBlock,
        {"num_heads": HEADS, "intermediate_dim": 32, "relative_position": position},
        x,
        (BATCH, LENGTH, WIDTH),
        variant=True,
    )
    assert layer.self_attention.relative_position == position


@RELATIVE
def test_language_model_saves_and_generates(position):
    lm = tiny_models.lm(13, position=position)
    assert lm.embedding.position_embedding is None  # no absolute positions added
    assert lm.decoder.blocks[0].self_attention.relative_position == position
    ids = np.array([[5, 6, 7, 0]], "int32")
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "lm.keras")
        lm.save(path)
        loaded = keras.saving.load_model(path)
    assert loaded.get_config() == lm.get_config()
    np.testing.assert_array_equal(to_numpy(loaded(ids)), to_numpy(lm(ids)))
    generated = lm.generate(ids[:, :3], max_length=7, jit_compile=False)
    np.testing.assert_array_equal(
        generated, loaded.generate(ids[:, :3], max_length=7, jit_compile=False)
    )


def test_seq2seq_positions_reach_self_attention_only():
    model = tiny_models.seq2seq(13, position="alibi")
    block = model.decoder.blocks[0]
    assert block.self_attention.relative_position == "alibi"
    assert block.cross_attention_layer.relative_position is None
    assert model.encoder.blocks[0].self_attention.relative_position == "alibi"
    assert type(model).from_config(model.get_config()).position == "alibi"


def test_bad_position_arguments():
    with pytest.raises(ValueError, match="absolute position, added to the embeddings"):
        MultiHeadAttention(2, relative_position="sinusoidal")
    with pytest.raises(ValueError, match="`relative_position` must be one of None, 'rotary'"):
        MultiHeadAttention(2, relative_position="relative")
    with pytest.raises(ValueError, match="`max_wavelength` must be a number greater than 1"):
        MultiHeadAttention(2, relative_position="rotary", max_wavelength=0)
    with pytest.raises(ValueError, match='`relative_position="alibi"` cannot be honoured'):
        MultiHeadAttention(2, relative_position="alibi", flash_attention=True)
    with pytest.raises(ValueError, match="head size must be even. Received: key_dim=3"):
        MultiHeadAttention(2, key_dim=3, relative_position="rotary").build((1, 4, 6))
    with pytest.raises(ValueError, match="`relative_position` must be one of None"):
        TransformerEncoderBlock(2, 8, relative_position="rope")
    # The earlier name, `position`, is refused with its new one; old configs still load.
    with pytest.raises(ValueError, match="takes `relative_position`.*Rename the argument"):
        TransformerEncoderBlock(2, 8, position="rotary")
    old_config = TransformerEncoderBlock(2, 8).get_config()
    del old_config["relative_position"]
    for position, expected in (("rotary", "rotary"), ("sinusoidal", None)):
        block = TransformerEncoderBlock.from_config({**old_config, "position": position})
        assert block.relative_position == expected
