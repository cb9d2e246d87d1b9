"""Non-ReLU activations and `use_bias=False`, by value against the float64 NumPy reference.

The reference tests use ReLU and biases throughout; here the feed-forward network and the
blocks run with each activation they accept by name (and the library's
`gelu_approximate`), and `MultiHeadAttention` / `FeedForward` with `use_bias=False` must
hold no bias weight at all and compute the reference without biases. (The blocks and the
models have no `use_bias` argument: their projections always have biases.)
"""

import keras
import numpy as np
import pytest
from numpy_transformer import (
    ACTIVATIONS,
    feed_forward,
    multi_head_attention,
    padding_mask_to_attention,
)
from reference_utils import (
    ZEROS,
    assert_close,
    attention_weights,
    built,
    decoder_block_reference,
    encoder_block_reference,
    feed_forward_weights,
    padding_mask,
    random_inputs,
    randomize_weights,
    to_numpy,
)

from keras_transformer.layers import (
    FeedForward,
    MultiHeadAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    gelu_approximate,
)

pytestmark = pytest.mark.backend_agnostic

BATCH, TARGET, SOURCE, WIDTH, HEADS, FFN_DIM = 2, 6, 5, 16, 4, 32
EPSILON = 1e-2
NON_RELU = ["gelu", "gelu_approximate", "silu", "tanh", "linear"]


def _keras_activation(name):
    return gelu_approximate if name == "gelu_approximate" else name


def test_the_reference_activations_differ():
    """Each formula differs from the others by far more than the 1e-5 of `assert_close`."""
    x = random_inputs(0, 1000) * 2.0
    values = {name: f(x.astype(np.float64)) for name, f in ACTIVATIONS.items()}
    for a in values:
        for b in values:
            if a < b:
                assert np.abs(values[a] - values[b]).max() > 1e-4, (a, b)


@pytest.mark.parametrize("activation", NON_RELU)
def test_feed_forward_activation_matches_reference(activation):
    x = random_inputs(0, BATCH, TARGET, WIDTH) * 2.0  # reach the non-linear parts
    layer = FeedForward(FFN_DIM, activation=_keras_activation(activation), **ZEROS)
    built(layer, x.shape, seed=1)
    w = feed_forward_weights(layer)
    expected = feed_forward(x, w.w1, w.b1, w.w2, w.b2, ACTIVATIONS[activation])
    assert_close(layer(x), expected)


def test_feed_forward_without_bias_has_no_bias_and_matches_reference():
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    layer = FeedForward(FFN_DIM, use_bias=False, activation="gelu", **ZEROS)
    layer.build(x.shape)
    assert [w.path.split("/")[-1] for w in layer.weights] == ["kernel", "kernel"]
    assert layer.intermediate_dense.bias is None and layer.output_dense.bias is None
    randomize_weights(layer, seed=2)
    w1, w2 = (to_numpy(v) for v in layer.weights)
    expected = ACTIVATIONS["gelu"](x.astype(np.float64) @ w1) @ w2
    assert_close(layer(x), expected)


def _mha_without_bias(kv_heads=None, **shapes):
    layer = MultiHeadAttention(HEADS, num_key_value_heads=kv_heads, use_bias=False, **ZEROS)
    layer.build(**shapes)
    assert len(layer.weights) == 4
    assert all(w.path.endswith("kernel") for w in layer.weights)
    randomize_weights(layer, seed=3)
    w = attention_weights(layer)
    for bias in (w.bq, w.bk, w.bv, w.bo):
        assert not np.any(bias)  # the reference runs without biases
    return layer, w


@pytest.mark.parametrize("kv_heads", [None, 2], ids=["mha", "gqa"])
def test_self_attention_without_bias_matches_reference(kv_heads, monkeypatch):
    """The fused query/key/value projection of self-attention, without its bias."""
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    layer, w = _mha_without_bias(kv_heads, query_shape=x.shape, value_shape=x.shape)
    mask = padding_mask([TARGET, 4], TARGET)[:, None, :]
    expected = multi_head_attention(x, x, w, mask=mask)
    # One tensor passed as query and value takes the fused path; two NumPy arguments
    # would not (Keras converts each to its own tensor), so spy on it.
    fused = []
    project = MultiHeadAttention._project_self_attention
    monkeypatch.setattr(
        MultiHeadAttention,
        "_project_self_attention",
        lambda self, h: fused.append(1) or project(self, h),
    )
    tensor = keras.ops.convert_to_tensor(x)
    assert_close(layer(tensor, tensor, attention_mask=mask), expected)
    assert fused == [1]
    assert_close(layer(x, x, attention_mask=mask), expected)  # the three projections
    assert fused == [1]


def test_cross_attention_without_bias_matches_reference():
    query = random_inputs(0, BATCH, TARGET, WIDTH)
    value = random_inputs(1, BATCH, SOURCE, 12)
    layer, w = _mha_without_bias(query_shape=query.shape, value_shape=value.shape)
    assert_close(layer(query, value), multi_head_attention(query, value, w))
    cache = layer.compute_cache(value)
    assert_close(layer(query, None, cache=cache), multi_head_attention(query, value, w))


def _block_kwargs(activation, norm_first):
    return dict(
        num_heads=HEADS,
        intermediate_dim=FFN_DIM,
        activation=_keras_activation(activation),
        norm_first=norm_first,
        layer_norm_epsilon=EPSILON,
        **ZEROS,
    )


@pytest.mark.parametrize(
    "activation, norm_first",
    [("gelu", False), ("gelu_approximate", True), ("silu", False)],
)
def test_encoder_block_activation_matches_reference(activation, norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    pad = padding_mask([TARGET, 3], TARGET)
    block = TransformerEncoderBlock(**_block_kwargs(activation, norm_first))
    built(block, x.shape, seed=7, scale=0.5)
    mask = padding_mask_to_attention(pad)
    expected = encoder_block_reference(
        block, x, EPSILON, mask, norm_first, activation=ACTIVATIONS[activation]
    )
    assert_close(block(x, padding_mask=pad), expected)


@pytest.mark.parametrize("activation, norm_first", [("gelu", True), ("gelu_approximate", False)])
def test_decoder_block_activation_matches_reference(activation, norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    block = TransformerDecoderBlock(**_block_kwargs(activation, norm_first))
    built(block, x.shape, memory.shape, seed=8, scale=0.5)
    expected = decoder_block_reference(
        block, x, memory, EPSILON, norm_first=norm_first, activation=ACTIVATIONS[activation]
    )
    assert_close(block(x, memory), expected)
