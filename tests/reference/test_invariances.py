"""Properties any correct Transformer has, checked on our layers.

(a) padding never changes real positions, (b) causality, (c) cached decoding equals
one causal pass, (d) self-attention without positions is permutation-equivariant,
(e) fully masked rows give zeros and never NaN, (f) XLA equals eager.
"""

import keras
import numpy as np
import pytest
from keras import ops
from reference_utils import (
    NORMS,
    ZERO_EMBEDDINGS,
    ZEROS,
    assert_close,
    built,
    padding_mask,
    random_inputs,
    randomize_weights,
    to_numpy,
)

from keras_transformer.layers import (
    MultiHeadAttention,
    ScaledDotProductAttention,
    TokenAndPositionEmbedding,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)
from keras_transformer.ops import scaled_dot_product_attention

pytestmark = pytest.mark.backend_agnostic

BATCH, LENGTH, SOURCE, WIDTH, HEADS, FFN_DIM, VOCAB = 2, 6, 5, 16, 4, 32, 13
HEAD_DIM = WIDTH // HEADS
PAD = 2  # extra padded positions
# (norm_first, num_key_value_heads)
DECODER_VARIANTS = pytest.mark.parametrize(
    "norm_first, kv_heads",
    [(False, None), (True, None), (False, 2), (True, 2)],
    ids=["post_norm", "pre_norm", "post_norm_gqa", "pre_norm_gqa"],
)


def _block_kwargs(norm_first=False, kv_heads=None, **kwargs):
    return dict(
        num_heads=HEADS,
        intermediate_dim=FFN_DIM,
        norm_first=norm_first,
        num_key_value_heads=kv_heads,
        **ZEROS,
        **kwargs,
    )


def _pad_right(x, extra, seed=99):
    """Appends `extra` positions of random garbage on axis 1."""
    garbage = random_inputs(seed, x.shape[0], extra, *x.shape[2:])
    return np.concatenate([x, garbage], axis=1)


def _pad_left(x, extra, seed=98):
    garbage = random_inputs(seed, x.shape[0], extra, *x.shape[2:])
    return np.concatenate([garbage, x], axis=1)


def _random_ids(seed, *shape):
    return np.random.default_rng(seed).integers(1, VOCAB, size=shape).astype("int32")


def _embedding(seed=0, position="sinusoidal"):
    layer = TokenAndPositionEmbedding(
        VOCAB, WIDTH, position=position, mask_zero=True, **ZERO_EMBEDDINGS
    )
    return built(layer, (None, None), seed=seed)


# --- (a) padding invariance ---------------------------------------------------------------


@NORMS
def test_encoder_block_padding_invariance(norm_first):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    block = built(TransformerEncoderBlock(**_block_kwargs(norm_first)), x.shape)
    padded = _pad_right(x, PAD)
    pad = padding_mask([LENGTH] * BATCH, LENGTH + PAD)
    assert_close(to_numpy(block(padded, padding_mask=pad))[:, :LENGTH], block(x))


@NORMS
def test_encoder_stack_padding_invariance_with_keras_mask(norm_first):
    ids = _random_ids(0, BATCH, SOURCE)
    embedding = _embedding()
    encoder = built(
        TransformerEncoder(num_layers=2, **_block_kwargs(norm_first)), (None, None, WIDTH), seed=1
    )
    padded_ids = np.pad(ids, ((0, 0), (0, PAD)))  # token 0 is padding
    expected = encoder(embedding(ids))
    assert_close(to_numpy(encoder(embedding(padded_ids)))[:, :SOURCE], expected)


@NORMS
@pytest.mark.parametrize("side", ["right", "left"])
def test_decoder_block_decoder_padding_invariance(norm_first, side):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    block = built(TransformerDecoderBlock(**_block_kwargs(norm_first)), x.shape, memory.shape)
    expected = block(x, memory)
    # Right padding is in every real token's future anyway; left padding is in its past,
    # so only the padding mask keeps it out. The block has no positions of its own.
    if side == "right":
        padded, real = _pad_right(x, PAD), slice(0, LENGTH)
    else:
        padded, real = _pad_left(x, PAD), slice(PAD, PAD + LENGTH)
    pad = np.zeros((BATCH, LENGTH + PAD), bool)
    pad[:, real] = True
    outputs = block(padded, memory, decoder_padding_mask=pad)
    assert_close(to_numpy(outputs)[:, real], expected)


def test_decoder_block_without_causal_mask_padding_invariance():
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    block = built(TransformerDecoderBlock(**_block_kwargs()), x.shape, memory.shape)
    expected = block(x, memory, use_causal_mask=False)
    pad = padding_mask([LENGTH] * BATCH, LENGTH + PAD)
    outputs = block(_pad_right(x, PAD), memory, decoder_padding_mask=pad, use_causal_mask=False)
    assert_close(to_numpy(outputs)[:, :LENGTH], expected)


@NORMS
def test_decoder_block_encoder_padding_invariance(norm_first):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    block = built(TransformerDecoderBlock(**_block_kwargs(norm_first)), x.shape, memory.shape)
    pad = padding_mask([SOURCE] * BATCH, SOURCE + PAD)
    outputs = block(x, _pad_right(memory, PAD), encoder_padding_mask=pad)
    assert_close(outputs, block(x, memory))


def test_decoder_stack_padding_invariance_with_keras_masks():
    source_ids, target_ids = _random_ids(0, BATCH, SOURCE), _random_ids(1, BATCH, LENGTH)
    source_embedding, target_embedding = _embedding(0), _embedding(1)
    decoder = built(
        TransformerDecoder(num_layers=2, **_block_kwargs()),
        (None, None, WIDTH),
        (None, None, WIDTH),
        seed=2,
    )

    def run(source, target):
        return to_numpy(decoder(target_embedding(target), source_embedding(source)))

    expected = run(source_ids, target_ids)
    padded = run(np.pad(source_ids, ((0, 0), (0, PAD))), np.pad(target_ids, ((0, 0), (0, PAD))))
    assert_close(padded[:, :LENGTH], expected)


def test_mha_padding_invariance_with_attention_mask():
    query = random_inputs(0, BATCH, LENGTH, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, WIDTH)
    layer = built(MultiHeadAttention(HEADS, **ZEROS), query.shape, value.shape)
    pad = padding_mask([SOURCE] * BATCH, SOURCE + PAD)
    outputs = layer(query, _pad_right(value, PAD), attention_mask=pad[:, None, :])
    assert_close(outputs, layer(query, value))


def test_mha_padding_invariance_with_keras_mask():
    ids = _random_ids(0, BATCH, LENGTH)
    embedding = _embedding()
    layer = built(
        MultiHeadAttention(HEADS, **ZEROS), (None, None, WIDTH), (None, None, WIDTH), seed=1
    )

    def run(token_ids):
        h = embedding(token_ids)
        return to_numpy(layer(h, h))

    padded = run(np.pad(ids, ((0, 0), (0, PAD))))
    assert_close(padded[:, :LENGTH], run(ids))


# --- (b) causality --------------------------------------------------------------------------


def _change_after(x, t, seed=7):
    """`x` with every position after `t` replaced by fresh random values."""
    changed = np.array(x)
    changed[:, t + 1 :] = random_inputs(seed, x.shape[0], x.shape[1] - t - 1, *x.shape[2:])
    return changed


def _assert_causal(fn, x, t=2):
    original, changed = to_numpy(fn(x)), to_numpy(fn(_change_after(x, t)))
    assert_close(changed[:, : t + 1], original[:, : t + 1])
    # ... and the change did reach the later positions (the test can see a leak).
    assert np.abs(changed[:, t + 1 :] - original[:, t + 1 :]).max() > 1e-3


def test_mha_causal_mask_is_causal():
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    layer = built(MultiHeadAttention(HEADS, **ZEROS), x.shape, x.shape)
    _assert_causal(lambda h: layer(h, h, use_causal_mask=True), x)


@NORMS
def test_decoder_block_is_causal(norm_first):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    block = built(TransformerDecoderBlock(**_block_kwargs(norm_first)), x.shape, memory.shape)
    _assert_causal(lambda h: block(h, memory), x)


@NORMS
def test_decoder_only_block_is_causal(norm_first):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    block = built(
        TransformerDecoderBlock(**_block_kwargs(norm_first), cross_attention=False), x.shape
    )
    _assert_causal(block, x)


@pytest.mark.parametrize("cross_attention", [True, False], ids=["seq2seq", "decoder_only"])
def test_decoder_stack_is_causal_at_every_step(cross_attention):
    ids = _random_ids(0, BATCH, LENGTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    embedding = _embedding()
    decoder = TransformerDecoder(
        num_layers=2, **_block_kwargs(norm_first=True), cross_attention=cross_attention
    )
    built(decoder, (None, None, WIDTH), (None, None, WIDTH) if cross_attention else None, seed=1)

    def run(token_ids):
        h = embedding(token_ids)
        return to_numpy(decoder(h, memory) if cross_attention else decoder(h))

    original = run(ids)
    for t in range(LENGTH - 1):
        changed_ids = np.array(ids)
        changed_ids[:, t + 1 :] = (ids[:, t + 1 :] % (VOCAB - 1)) + 1  # other non-pad tokens
        changed = run(changed_ids)
        assert_close(changed[:, : t + 1], original[:, : t + 1], err_msg=f"step {t}")
        assert np.abs(changed[:, t + 1 :] - original[:, t + 1 :]).max() > 1e-3


# --- (c) cached decoding == one causal pass ---------------------------------------------------

SCHEDULES = pytest.mark.parametrize(
    "schedule",
    [[1] * LENGTH, [3, 1, 1, 1]],
    ids=["one_by_one", "prompt3_then_steps"],
)
MAX_LENGTH = LENGTH + 2  # unfilled cache slots must stay invisible


def _steps(schedule):
    """`[3, 1, 1, 1]` → slices (0, 3), (3, 4), (4, 5), (5, 6)."""
    start = 0
    for size in schedule:
        yield start, start + size
        start += size


def _decode_block_in_steps(block, x, memory, schedule, kv_heads=None, **masks):
    """`block`'s outputs for `x`, fed in `schedule`'s steps through its caches."""
    cross_cache = block.cross_attention_layer.compute_cache(memory)
    self_cache = ops.zeros((BATCH, 2, MAX_LENGTH, kv_heads or HEADS, HEAD_DIM))
    outputs = []
    for start, end in _steps(schedule):
        out, self_cache = block(
            x[:, start:end],
            **masks,
            self_attention_cache=self_cache,
            cross_attention_cache=cross_cache,
            cache_update_index=start,
        )
        outputs.append(to_numpy(out))
    return np.concatenate(outputs, axis=1)


@SCHEDULES
@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
def test_mha_cached_decoding_matches_causal_pass(schedule, kv_heads):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    layer = built(
        MultiHeadAttention(HEADS, num_key_value_heads=kv_heads, **ZEROS), x.shape, x.shape
    )
    expected = layer(x, x, use_causal_mask=True)
    cache = np.zeros((BATCH, 2, MAX_LENGTH, kv_heads or HEADS, HEAD_DIM), "float32")
    outputs = []
    for start, end in _steps(schedule):
        step = x[:, start:end]
        out, cache = layer(step, step, cache=cache, cache_update_index=start)
        outputs.append(to_numpy(out))
    assert_close(np.concatenate(outputs, axis=1), expected)
    # The cache now holds every position's keys and values, and zeros after them.
    assert_close(to_numpy(cache)[:, :, LENGTH:], np.zeros_like(to_numpy(cache)[:, :, LENGTH:]))


def test_mha_cached_decoding_with_tensor_index():
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    layer = built(MultiHeadAttention(HEADS, **ZEROS), x.shape, x.shape)
    cache = ops.zeros((BATCH, 2, MAX_LENGTH, HEADS, HEAD_DIM))
    outputs = []
    for t in range(LENGTH):
        step = x[:, t : t + 1]
        index = ops.convert_to_tensor(t, dtype="int32")
        out, cache = layer(step, step, cache=cache, cache_update_index=index)
        outputs.append(to_numpy(out))
    assert_close(np.concatenate(outputs, axis=1), layer(x, x, use_causal_mask=True))


@DECODER_VARIANTS
@SCHEDULES
def test_decoder_block_cached_decoding_matches_causal_pass(norm_first, kv_heads, schedule):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    encoder_pad = padding_mask([SOURCE, 3], SOURCE)
    block = TransformerDecoderBlock(**_block_kwargs(norm_first, kv_heads))
    built(block, x.shape, memory.shape)
    expected = block(x, memory, encoder_padding_mask=encoder_pad)
    outputs = _decode_block_in_steps(
        block, x, memory, schedule, kv_heads, encoder_padding_mask=encoder_pad
    )
    assert_close(outputs, expected)


def test_decoder_block_cached_decoding_with_left_padded_prompts():
    """Batched generation: prompts of different lengths, left-padded, share one cache."""
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    pad = np.ones((BATCH, LENGTH), bool)
    pad[0, :2] = False  # the first prompt is two tokens shorter
    block = built(TransformerDecoderBlock(**_block_kwargs()), x.shape, memory.shape)
    expected = to_numpy(block(x, memory, decoder_padding_mask=pad))

    cache_pad = np.pad(pad, ((0, 0), (0, MAX_LENGTH - LENGTH)), constant_values=True)
    outputs = _decode_block_in_steps(block, x, memory, [3, 1, 1, 1], decoder_padding_mask=cache_pad)
    assert_close(outputs[pad], expected[pad])


@DECODER_VARIANTS
def test_decoder_stack_cached_decoding_matches_causal_pass(norm_first, kv_heads):
    ids = _random_ids(0, BATCH, LENGTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    embedding = _embedding()
    decoder = TransformerDecoder(num_layers=2, **_block_kwargs(norm_first, kv_heads))
    built(decoder, (None, None, WIDTH), memory.shape, seed=1)
    expected = decoder(embedding(ids), memory)

    cross_cache = decoder.compute_cross_attention_cache(memory)
    self_cache = decoder.initial_self_attention_cache(BATCH, MAX_LENGTH)
    outputs = []
    for start, end in _steps([3, 1, 1, 1]):
        hidden = embedding(ids[:, start:end], start_index=start)
        out, self_cache = decoder(
            hidden,
            self_attention_cache=self_cache,
            cross_attention_cache=cross_cache,
            cache_update_index=start,
        )
        assert isinstance(self_cache, tuple) and len(self_cache) == 2
        outputs.append(to_numpy(out))
    assert_close(np.concatenate(outputs, axis=1), expected)


def test_decoder_only_stack_cached_decoding_matches_causal_pass():
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    decoder = TransformerDecoder(num_layers=2, **_block_kwargs(True, 2), cross_attention=False)
    built(decoder, x.shape, seed=1)
    self_cache = decoder.initial_self_attention_cache(BATCH, MAX_LENGTH)
    outputs = []
    for start, end in _steps([3, 1, 1, 1]):
        out, self_cache = decoder(
            x[:, start:end], self_attention_cache=self_cache, cache_update_index=start
        )
        outputs.append(to_numpy(out))
    assert_close(np.concatenate(outputs, axis=1), decoder(x))


# --- (d) permutations -----------------------------------------------------------------------

PERMUTATION = np.array([4, 0, 5, 2, 1, 3])


def test_mha_self_attention_is_permutation_equivariant():
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    layer = built(MultiHeadAttention(HEADS, **ZEROS), x.shape, x.shape)
    permuted = x[:, PERMUTATION]
    assert_close(layer(permuted, permuted), to_numpy(layer(x, x))[:, PERMUTATION])


@NORMS
def test_encoder_block_is_permutation_equivariant(norm_first):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    pad = padding_mask([LENGTH, 4], LENGTH)
    block = built(TransformerEncoderBlock(**_block_kwargs(norm_first)), x.shape)
    outputs = block(x[:, PERMUTATION], padding_mask=pad[:, PERMUTATION])
    assert_close(outputs, to_numpy(block(x, padding_mask=pad))[:, PERMUTATION])


WORDS = {"the": 1, "cat": 2, "chases": 3, "dog": 4}


def _encode_sentences(position):
    """Encodes the two sentences; returns the encoder output at "cat" in each."""
    first = "the cat chases the dog".split()
    second = "the dog chases the cat".split()
    ids = np.array([[WORDS[w] for w in first], [WORDS[w] for w in second]], "int32")
    embedding = TokenAndPositionEmbedding(
        len(WORDS) + 1, WIDTH, position=position, **ZERO_EMBEDDINGS
    )
    built(embedding, (None, None), seed=3)
    encoder = built(
        TransformerEncoder(num_layers=2, **_block_kwargs()), (None, None, WIDTH), seed=4
    )
    outputs = to_numpy(encoder(embedding(ids)))
    return outputs[0, first.index("cat")], outputs[1, second.index("cat")]


def test_without_positions_word_order_is_invisible():
    cat_first, cat_second = _encode_sentences(position=None)
    assert_close(cat_first, cat_second)


def test_with_sinusoidal_positions_word_order_matters():
    cat_first, cat_second = _encode_sentences(position="sinusoidal")
    assert np.abs(cat_first - cat_second).max() > 1e-3


# --- (e) fully masked rows ------------------------------------------------------------------

DTYPES = pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
PATHS = pytest.mark.parametrize("path", ["fused", "scores", "dropout"])


def _fully_masked_case(dtype):
    q = ops.cast(random_inputs(0, BATCH, LENGTH, HEADS, HEAD_DIM), dtype)
    k = ops.cast(random_inputs(1, BATCH, SOURCE, HEADS, HEAD_DIM), dtype)
    v = ops.cast(random_inputs(2, BATCH, SOURCE, HEADS, HEAD_DIM), dtype)
    mask = np.ones((BATCH, LENGTH, SOURCE), bool)
    mask[0, 1] = False  # one query row without any key
    mask[1] = False  # a whole sequence without any key
    return q, k, v, mask


@DTYPES
@PATHS
def test_sdpa_fully_masked_rows_are_zero_not_nan(dtype, path):
    q, k, v, mask = _fully_masked_case(dtype)
    kwargs = {
        "fused": {},
        "scores": {"return_attention_scores": True},
        "dropout": {"dropout": 0.5, "training": True, "seed": 1},
    }[path]
    result = scaled_dot_product_attention(q, k, v, mask=mask, **kwargs)
    outputs, scores = result if path == "scores" else (result, None)
    assert keras.backend.standardize_dtype(outputs.dtype) == dtype
    outputs = to_numpy(outputs)
    assert np.all(np.isfinite(outputs))
    assert np.all(outputs[0, 1] == 0.0) and np.all(outputs[1] == 0.0)
    assert np.abs(outputs[0, [0, 2, 3, 4, 5]]).max() > 0.0
    if scores is not None:
        scores = to_numpy(scores)
        assert np.all(np.isfinite(scores))
        assert np.all(scores[0, :, 1] == 0.0) and np.all(scores[1] == 0.0)
        np.testing.assert_allclose(scores[0, :, 0].sum(-1), 1.0, atol=1e-2)


@DTYPES
@pytest.mark.parametrize("scores", [False, True], ids=["fused", "scores"])
def test_attention_layer_fully_masked_rows_are_zero_not_nan(dtype, scores):
    q, k, v, mask = _fully_masked_case(dtype)
    layer = ScaledDotProductAttention(dtype=dtype)
    result = layer(q, k, v, attention_mask=mask, return_attention_scores=scores)
    outputs = to_numpy(result[0] if scores else result)
    assert np.all(np.isfinite(outputs))
    assert np.all(outputs[0, 1] == 0.0) and np.all(outputs[1] == 0.0)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_encoder_block_with_an_all_padding_sequence_has_no_nan(policy):
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    block = TransformerEncoderBlock(**_block_kwargs(), dtype=policy)
    built(block, x.shape)
    pad = padding_mask([LENGTH, 0], LENGTH)
    outputs = to_numpy(block(x, padding_mask=pad))
    assert np.all(np.isfinite(outputs))


# --- (f) XLA == eager -----------------------------------------------------------------------


def _seq2seq_model():
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    memory = TransformerEncoder(num_layers=1, **_block_kwargs())(_embedding(0)(source))
    target_embedding = _embedding(1)
    hidden = TransformerDecoder(num_layers=1, **_block_kwargs(norm_first=True))(
        target_embedding(target), memory
    )
    logits = keras.layers.Dense(VOCAB, **ZEROS)(hidden)
    model = keras.Model([source, target], logits)
    randomize_weights(model, seed=5)
    return model


# Keras's `jit_compile=True` is `torch.compile` on PyTorch, which Keras calls experimental
# and `choose_jit_compile` never turns on there; this test took 80-100 s on the 2-core CI
# with it (each of the two such tests about a fifth of the whole PyTorch run).
@pytest.mark.skipif(
    keras.backend.backend() == "torch", reason="torch.compile: experimental in Keras, unused here"
)
def test_xla_matches_eager():
    model = _seq2seq_model()
    source = np.pad(_random_ids(0, BATCH, SOURCE), ((0, 0), (0, 2)))
    target = np.pad(_random_ids(1, BATCH, LENGTH), ((0, 0), (0, 2)))
    source[1, 3:] = 0
    eager = to_numpy(model([source, target], training=False))
    model.compile(jit_compile=True)
    compiled = model.predict([source, target], batch_size=BATCH, verbose=0)
    assert np.all(np.isfinite(eager))
    assert_close(compiled, eager)
