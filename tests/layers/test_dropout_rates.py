"""Dropout drops at its rate, scales the kept values by 1/(1-p), and repeats with its seed.

Each layer gets weights that make the dropped tensor readable at the output: a tensor of
known values (ones, or the attention probabilities 1/S) goes through the dropout and
nothing after it mixes elements. The fraction of zeros must then be `p` within 4.5
binomial standard deviations, `sqrt(p(1-p)/n)` (a fixed seed makes each test
deterministic; the band says the rate is `p`, not merely near it), and every kept value
must be exactly the inference value divided by `1 - p`.

Seeds. Only `MultiHeadAttention` takes a `seed` argument. `FeedForward`,
`TokenAndPositionEmbedding` and the blocks use `keras_transformer.layers.Dropout` (Keras's
layer with a faster mask on TensorFlow) without one, so
their masks come from Keras' global seed (`keras.utils.set_random_seed`) at construction:
rebuilt after the same global seed they repeat, after another they differ. The blocks do
not pass a seed to their attention either.
"""

import keras
import numpy as np
import pytest

from keras_transformer.layers import (
    FeedForward,
    MultiHeadAttention,
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

# On JAX (eager ops compile one by one) the whole file takes ~25 s: a subset runs there,
# each case marked `backend_agnostic`.
JAX_TOO = pytest.mark.backend_agnostic

RATE = 0.3
WIDTH = 16


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


def assert_dropped_at_rate(outputs, inference, rate=RATE):
    """`outputs` is `inference` with a fraction `rate` zeroed and the rest scaled by 1/(1-rate)."""
    outputs, inference = to_numpy(outputs), to_numpy(inference)
    assert np.all(inference != 0)  # so that a zero can only be a dropped element
    dropped = outputs == 0
    n = dropped.size
    tolerance = 4.5 * np.sqrt(rate * (1 - rate) / n)
    assert abs(dropped.mean() - rate) <= tolerance, (dropped.mean(), rate, tolerance, n)
    np.testing.assert_allclose(
        outputs[~dropped], inference[~dropped] / (1 - rate), rtol=1e-5, atol=0
    )


def set_weights_by_path(layer, values):
    """Every weight zero (layer-norm gammas one), except `values[suffix]` for matching paths."""
    for variable in layer.weights:
        value = np.ones(variable.shape) if variable.path.endswith("gamma") else None
        for suffix, given in values.items():
            if variable.path.endswith(suffix):
                value = given(tuple(variable.shape)) if callable(given) else given
        if value is None:
            value = np.zeros(variable.shape)
        variable.assign(np.broadcast_to(value, variable.shape).astype(variable.dtype))


# --- multi-head attention: dropout on the attention probabilities ----------------------

HEADS, LENGTH = 2, WIDTH


def _attention_reads_out_probabilities(seed):
    """Uniform attention (zero query/key kernels) over one-hot values, read out as is.

    With `x[s] = e_s`, value kernel `I` per head and output kernel `I` per head into its
    own block of outputs, output `[b, t, h * L + s]` is head `h`'s (dropped) probability
    of position `s` for query `t`: `1/L`, or 0, or `1/(L (1-p))`.
    """
    layer = MultiHeadAttention(
        HEADS, key_dim=LENGTH, output_dim=HEADS * LENGTH, dropout=RATE, seed=seed
    )
    layer.build((None, LENGTH, WIDTH), (None, LENGTH, WIDTH))
    value_kernel = np.repeat(np.eye(WIDTH)[:, None, :], HEADS, axis=1)
    output_kernel = np.zeros((HEADS, LENGTH, HEADS * LENGTH))
    for h in range(HEADS):
        output_kernel[h, :, h * LENGTH : (h + 1) * LENGTH] = np.eye(LENGTH)
    set_weights_by_path(
        layer, {"value/kernel": value_kernel, "attention_output/kernel": output_kernel}
    )
    return layer


def _one_hot_positions(batch):
    return np.repeat(np.eye(LENGTH, WIDTH, dtype="float32")[None], batch, axis=0)


@JAX_TOO
def test_attention_dropout_drops_probabilities_at_its_rate():
    x = _one_hot_positions(batch=32)  # 32 * 2 heads * 16 * 16 = 16384 probabilities
    layer = _attention_reads_out_probabilities(seed=3)
    inference = layer(x, x)
    np.testing.assert_allclose(to_numpy(inference), 1.0 / LENGTH, rtol=1e-6)
    np.testing.assert_array_equal(to_numpy(layer(x, x, training=False)), to_numpy(inference))
    assert_dropped_at_rate(layer(x, x, training=True), inference)


@JAX_TOO
def test_attention_dropout_repeats_with_its_seed():
    x = _one_hot_positions(batch=2)

    def first_two_calls(seed):
        layer = _attention_reads_out_probabilities(seed)
        return to_numpy(layer(x, x, training=True)), to_numpy(layer(x, x, training=True))

    first, second = first_two_calls(seed=5)
    again_first, again_second = first_two_calls(seed=5)
    np.testing.assert_array_equal(again_first, first)
    np.testing.assert_array_equal(again_second, second)
    assert not np.array_equal(second, first)  # a new mask on every call
    assert not np.array_equal(first_two_calls(seed=6)[0], first)


# --- feed-forward: dropout after the activation ----------------------------------------


def _feed_forward_of_ones():
    """`FFN(0) = Dropout(1) @ I`: the dropped intermediate activations, read out directly."""
    layer = FeedForward(WIDTH, activation="relu", dropout=RATE)
    layer.build((None, None, WIDTH))
    set_weights_by_path(
        layer, {"intermediate_dense/bias": 1.0, "output_dense/kernel": np.eye(WIDTH)}
    )
    return layer


@JAX_TOO
def test_feed_forward_dropout_drops_at_its_rate():
    x = np.zeros((64, 16, WIDTH), "float32")  # 16384 activations
    layer = _feed_forward_of_ones()
    inference = layer(x)
    np.testing.assert_array_equal(to_numpy(inference), 1.0)
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), 1.0)
    assert_dropped_at_rate(layer(x, training=True), inference)


# --- token and position embedding: dropout on the sum ----------------------------------


def _embedding_of_ones():
    layer = TokenAndPositionEmbedding(
        11, WIDTH, position=None, scale_embeddings=False, dropout=RATE
    )
    layer.build((None, None))
    set_weights_by_path(layer, {"embeddings": 1.0})
    return layer


@JAX_TOO
def test_embedding_dropout_drops_at_its_rate():
    ids = np.random.default_rng(0).integers(1, 11, (64, 16)).astype("int32")
    layer = _embedding_of_ones()
    inference = layer(ids)
    np.testing.assert_array_equal(to_numpy(inference), 1.0)
    np.testing.assert_array_equal(to_numpy(layer(ids, training=False)), 1.0)
    assert_dropped_at_rate(layer(ids, training=True), inference)


# --- the blocks: residual dropout on each sub-layer, activation dropout in the FFN ------

BATCH, TOKENS = 32, 16  # 32 * 16 * 16 = 8192 elements per sub-layer output


def _inputs():
    rng = np.random.default_rng(1)
    return (
        rng.standard_normal((BATCH, TOKENS, WIDTH)).astype("float32"),
        rng.standard_normal((BATCH, 5, WIDTH)).astype("float32"),
    )


def _block(cls, sublayer, **rates):
    """A pre-norm block in which only `sublayer` adds something: ones, at every element.

    Pre-norm, `x + Dropout(F(LN(x)))`: with every kernel zero, a sub-layer's output is its
    last bias, so `outputs - x` is the dropped bias of the one sub-layer given bias one.
    For `"activation"` the FFN's inner bias is one and its output kernel the identity, so
    the difference is the FFN's activation dropout instead.
    """
    kwargs = dict(num_heads=2, intermediate_dim=WIDTH, dropout=0.0, norm_first=True)
    block = cls(**{**kwargs, **rates})
    if cls is TransformerDecoderBlock:
        block.build((None, None, WIDTH), (None, None, WIDTH))
    else:
        block.build((None, None, WIDTH))
    values = {
        "self_attention": {"self_attention/attention_output/bias": 1.0},
        "cross_attention": {"cross_attention/attention_output/bias": 1.0},
        "feed_forward": {"feed_forward/output_dense/bias": 1.0},
        "activation": {
            "feed_forward/intermediate_dense/bias": 1.0,
            "feed_forward/output_dense/kernel": np.eye(WIDTH),
        },
    }[sublayer]
    set_weights_by_path(block, values)
    return block


def _added(block, x, memory, training):
    if isinstance(block, TransformerDecoderBlock):
        return to_numpy(block(x, memory, training=training)) - x
    return to_numpy(block(x, training=training)) - x


BLOCK_CASES = [
    (TransformerEncoderBlock, "self_attention", "dropout", True),
    (TransformerEncoderBlock, "feed_forward", "dropout", False),
    (TransformerEncoderBlock, "activation", "activation_dropout", False),
    (TransformerDecoderBlock, "self_attention", "dropout", False),
    (TransformerDecoderBlock, "cross_attention", "dropout", True),
    (TransformerDecoderBlock, "feed_forward", "dropout", False),
    (TransformerDecoderBlock, "activation", "activation_dropout", False),
]


@pytest.mark.parametrize(
    "cls, sublayer, rate_name",
    [
        pytest.param(c, s, r, marks=[JAX_TOO] if jax else [], id=f"{c.__name__[11:-5].lower()}-{s}")
        for c, s, r, jax in BLOCK_CASES
    ],
)
def test_block_dropout_drops_at_its_rate(cls, sublayer, rate_name):
    x, memory = _inputs()
    block = _block(cls, sublayer, **{rate_name: RATE})
    inference = _added(block, x, memory, training=False)
    # x + 1 - x is 1 up to float32 rounding of x + 1.
    np.testing.assert_allclose(inference, 1.0, atol=1e-6)
    np.testing.assert_array_equal(_added(block, x, memory, training=False), inference)
    added = _added(block, x, memory, training=True)
    # A dropped element adds nothing: (x + 0) - x is exactly 0.
    dropped = added == 0
    tolerance = 4.5 * np.sqrt(RATE * (1 - RATE) / dropped.size)
    assert abs(dropped.mean() - RATE) <= tolerance, (dropped.mean(), tolerance)
    np.testing.assert_allclose(added[~dropped], 1.0 / (1 - RATE), rtol=1e-5)


# --- without a seed argument: repeatable through Keras' global seed --------------------


def _block_with_every_dropout(cls, x, memory):
    block = cls(
        num_heads=2,
        intermediate_dim=32,
        dropout=RATE,
        attention_dropout=RATE,
        activation_dropout=RATE,
    )
    if cls is TransformerDecoderBlock:
        block.build(x.shape, memory.shape)
    else:
        block.build(x.shape)
    rng = np.random.default_rng(2)  # the same weights whatever the global seed
    block.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in block.weights])
    return block


LAYERS_WITHOUT_SEED = {
    "feed_forward": lambda x, memory: _feed_forward_of_ones(),
    "embedding": lambda x, memory: _embedding_of_ones(),
    "encoder_block": lambda x, memory: _block_with_every_dropout(
        TransformerEncoderBlock, x, memory
    ),
    "decoder_block": lambda x, memory: _block_with_every_dropout(
        TransformerDecoderBlock, x, memory
    ),
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[JAX_TOO] if name == "feed_forward" else [])
        for name in LAYERS_WITHOUT_SEED
    ],
)
def test_global_seed_repeats_training_outputs(name):
    x, memory = _inputs()
    x, memory = x[:2], memory[:2]
    ids = np.random.default_rng(0).integers(1, 11, (2, TOKENS)).astype("int32")

    def call(layer, training):
        if name == "embedding":
            return to_numpy(layer(ids, training=training))
        if name == "decoder_block":
            return to_numpy(layer(x, memory, training=training))
        return to_numpy(layer(x, training=training))

    def rebuilt(global_seed):
        keras.utils.set_random_seed(global_seed)
        layer = LAYERS_WITHOUT_SEED[name](x, memory)
        return layer, call(layer, True)

    layer, first = rebuilt(10)
    inference = call(layer, False)
    np.testing.assert_array_equal(call(layer, False), inference)  # inference is deterministic
    assert not np.allclose(first, inference)  # training mode does drop
    np.testing.assert_array_equal(rebuilt(10)[1], first)
    assert not np.array_equal(rebuilt(11)[1], first)


def test_block_attention_dropout_alone_changes_training_outputs():
    """`attention_dropout` reaches the block's attention (all other rates zero)."""
    x, memory = _inputs()
    x = x[:2]
    block = TransformerEncoderBlock(
        num_heads=2, intermediate_dim=32, dropout=0.0, attention_dropout=RATE
    )
    block.build(x.shape)
    assert block.self_attention.dropout == RATE
    rng = np.random.default_rng(3)
    block.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in block.weights])
    inference = to_numpy(block(x, training=False))
    assert not np.allclose(to_numpy(block(x, training=True)), inference, atol=1e-3)
    quiet = TransformerEncoderBlock(num_heads=2, intermediate_dim=32, dropout=0.0)
    quiet.build(x.shape)
    quiet.set_weights(block.get_weights())
    np.testing.assert_allclose(to_numpy(quiet(x, training=True)), inference, atol=1e-6)
