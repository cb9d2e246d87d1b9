"""Keras's `MultiHeadAttention` arguments on ours, against Keras's layer with the same weights.

Gated attention, sliding windows, per-head masks, regularization losses and
constraints: each is computed by both layers from copied weights (float32, 1e-5).
"""

import keras
import numpy as np
import pytest
from keras import ops
from reference_utils import assert_close, built, random_inputs, to_numpy

from keras_transformer.layers import MultiHeadAttention, TransformerEncoderBlock

pytestmark = pytest.mark.backend_agnostic

BATCH, LENGTH, SOURCE, WIDTH, HEADS = 2, 7, 5, 16, 4


def _pair(query_shape, value_shape=None, **kwargs):
    """Ours with random weights, and Keras's layer with the same weights."""
    value_shape = value_shape or query_shape
    ours = built(MultiHeadAttention(num_heads=HEADS, **kwargs), query_shape, value_shape)
    theirs = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=WIDTH // HEADS, **kwargs)
    theirs.build(query_shape, value_shape)
    # Our weights list in Keras's order (gate between key and value), so a user's
    # `set_weights(keras_layer.get_weights())` works; copied here the same way.
    theirs.set_weights(ours.get_weights())
    return ours, theirs


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_gated_attention_matches_keras(cross):
    query = random_inputs(0, BATCH, LENGTH, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, WIDTH) if cross else query
    ours, theirs = _pair(query.shape, value.shape, use_gate=True)
    assert [w.path.split("/", 1)[1] for w in ours.weights] == [
        w.path.split("/", 1)[1] for w in theirs.weights
    ]
    query = ops.convert_to_tensor(query)
    value = query if not cross else value
    assert_close(ours(query, value), theirs(query, value))


@pytest.mark.parametrize("causal", [False, True], ids=["band", "causal_band"])
def test_sliding_window_matches_keras(causal):
    x = ops.convert_to_tensor(random_inputs(0, BATCH, LENGTH, WIDTH))
    mask = np.ones((BATCH, LENGTH, LENGTH), bool)
    mask[1, :, 5:] = False  # padding, merged with the window
    ours, theirs = _pair(x.shape, sliding_window=3)
    assert_close(
        ours(x, x, attention_mask=mask, use_causal_mask=causal),
        theirs(x, x, attention_mask=mask, use_causal_mask=causal),
    )


def test_cached_decoding_with_a_window_equals_the_full_pass():
    x = ops.convert_to_tensor(random_inputs(0, BATCH, LENGTH, WIDTH))
    layer = built(
        MultiHeadAttention(num_heads=HEADS, num_key_value_heads=2, sliding_window=3),
        x.shape,
        x.shape,
    )
    full = layer(x, x, use_causal_mask=True)
    cache = ops.zeros(layer.cache_shape(BATCH, LENGTH))
    steps = []
    for t in range(LENGTH):
        step = x[:, t : t + 1]
        out, cache = layer(step, step, cache=cache, cache_update_index=t)
        steps.append(out)
    assert_close(ops.concatenate(steps, axis=1), full)
    # The window matters: without it the last step would see all seven positions.
    unwindowed = MultiHeadAttention.from_config({**layer.get_config(), "sliding_window": None})
    unwindowed.build(x.shape, x.shape)
    unwindowed.set_weights(layer.get_weights())
    assert np.max(np.abs(to_numpy(unwindowed(x, x, use_causal_mask=True)) - to_numpy(full))) > 1e-3


def test_per_head_mask_matches_keras_and_broadcasts_like_rank_3():
    query = random_inputs(0, BATCH, LENGTH, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, WIDTH)
    ours, theirs = _pair(query.shape, value.shape)
    per_head = np.random.default_rng(2).random((BATCH, HEADS, LENGTH, SOURCE)) < 0.6
    per_head[..., 0] = True  # Keras spreads fully masked rows uniformly; we return zeros
    assert_close(
        ours(query, value, attention_mask=per_head), theirs(query, value, attention_mask=per_head)
    )
    shared = per_head[:, 0]
    broadcast = np.broadcast_to(shared[:, None], per_head.shape)
    assert_close(
        ours(query, value, attention_mask=broadcast), ours(query, value, attention_mask=shared)
    )
    assert_close(
        ours(query, value, attention_mask=shared[:, None]),
        ours(query, value, attention_mask=shared),
    )


REGULARIZED = dict(
    kernel_regularizer=keras.regularizers.L2(0.01),
    bias_regularizer=keras.regularizers.L1(0.02),
    activity_regularizer=keras.regularizers.L2(0.003),
)


def test_regularization_losses_equal_keras():
    x = ops.convert_to_tensor(random_inputs(0, BATCH, LENGTH, WIDTH))
    ours, theirs = _pair(x.shape, use_gate=True, **REGULARIZED)
    assert_close(ours(x, x), theirs(x, x))
    # Ten weight losses (five kernels, five biases), then one activity loss per projection.
    assert len(ours.losses) == len(theirs.losses) == 15
    assert_close(sorted(map(to_numpy, ours.losses)), sorted(map(to_numpy, theirs.losses)))


def test_block_regularizes_every_projection():
    block = built(
        TransformerEncoderBlock(
            num_heads=HEADS, intermediate_dim=32, kernel_regularizer=keras.regularizers.L2(0.01)
        ),
        (BATCH, LENGTH, WIDTH),
    )
    kernels = [w for w in block.weights if w.path.endswith("kernel")]
    assert len(kernels) == 6  # query, key, value, attention output, two feed-forward
    expected = sum(0.01 * np.sum(to_numpy(k) ** 2) for k in kernels)
    assert_close(sum(to_numpy(loss) for loss in block.losses), expected)


def test_constraints_hold_after_an_optimizer_step():
    inputs = keras.Input((LENGTH, WIDTH))
    attention = MultiHeadAttention(
        num_heads=HEADS,
        use_gate=True,
        kernel_constraint=keras.constraints.NonNeg(),
        bias_constraint=keras.constraints.MaxNorm(0.05, axis=-1),
    )
    model = keras.Model(inputs, attention(inputs, inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    x = random_inputs(0, BATCH, LENGTH, WIDTH)
    model.train_on_batch(x, -np.abs(random_inputs(1, BATCH, LENGTH, WIDTH)) - 1)
    kernels = [w for w in attention.weights if w.path.endswith("kernel")]
    biases = [w for w in attention.weights if w.path.endswith("bias")]
    assert len(kernels) == len(biases) == 5
    for kernel in kernels:
        assert to_numpy(kernel).min() >= 0.0, kernel.path
    for bias in biases:
        assert np.sqrt(np.sum(to_numpy(bias) ** 2, axis=-1)).max() <= 0.05 + 1e-6, bias.path


def test_a_keras_layer_config_loads_into_ours_with_the_same_outputs():
    x = ops.convert_to_tensor(random_inputs(0, BATCH, LENGTH, WIDTH))
    theirs = keras.layers.MultiHeadAttention(
        num_heads=HEADS, key_dim=8, use_gate=True, sliding_window=4, kernel_regularizer="l2"
    )
    theirs.build(x.shape, x.shape)
    ours = MultiHeadAttention.from_config(theirs.get_config())
    ours.build(x.shape, x.shape)
    ours.set_weights(theirs.get_weights())
    assert_close(ours(x, x, use_causal_mask=True), theirs(x, x, use_causal_mask=True))
    assert_close(sum(map(to_numpy, ours.losses)), sum(map(to_numpy, theirs.losses)))
