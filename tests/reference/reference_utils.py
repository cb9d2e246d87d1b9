"""Helpers shared by the reference tests: random weights, weight mapping, comparisons."""

import keras
import numpy as np
import pytest
from numpy_transformer import (
    AttentionWeights,
    FeedForwardWeights,
    LayerNormWeights,
    decoder_block,
    encoder_block,
    relu,
)

from tests.random_weights import randomize_weights

# Every test overwrites the weights with `randomize_weights`, so layers are built with
# constant initializers: on JAX each random initializer compiles once per weight shape,
# which was a fifth of this directory's run time.
ZEROS = {"kernel_initializer": "zeros"}
ZERO_EMBEDDINGS = {"embeddings_initializer": "zeros"}

# float32 layers against the float64 reference (or another float32 implementation).
ATOL = 1e-5
RTOL = 1e-5

NORMS = pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])


def assert_close(actual, expected, atol=ATOL, rtol=RTOL, err_msg=""):
    np.testing.assert_allclose(
        to_numpy(actual), to_numpy(expected), atol=atol, rtol=rtol, err_msg=err_msg
    )


def to_numpy(x):
    """Any backend tensor (or array, variable) → float64 NumPy array."""
    if isinstance(x, keras.Variable):
        x = x.value
    if not isinstance(x, np.ndarray):
        x = keras.ops.convert_to_numpy(x)
    return np.asarray(x).astype(np.float64)


def built(layer, *shapes, seed=0, scale=0.3):
    """`layer` built for `shapes`, with `randomize_weights`' values; returns it."""
    layer.build(*shapes)
    randomize_weights(layer, seed, scale)
    return layer


def random_inputs(seed, *shape):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def attention_weights(mha):
    """Our `MultiHeadAttention` (or Keras core's) → the reference's per-head weights.

    The einsum kernels are `(d_model, heads, head_dim)` for query/key/value and
    `(heads, head_dim, d_model)` for the output: head `i` is `kernel[:, i, :]`.
    """
    dense = {
        "q": getattr(mha, "query_dense", None) or mha._query_dense,
        "k": getattr(mha, "key_dense", None) or mha._key_dense,
        "v": getattr(mha, "value_dense", None) or mha._value_dense,
        "o": getattr(mha, "output_dense", None) or mha._output_dense,
    }

    def per_head(layer):
        kernel = to_numpy(layer.kernel)
        return np.transpose(kernel, (1, 0, 2)), bias_of(layer, kernel.shape[1:])

    wq, bq = per_head(dense["q"])
    wk, bk = per_head(dense["k"])
    wv, bv = per_head(dense["v"])
    wo = to_numpy(dense["o"].kernel)
    wo = wo.reshape(-1, wo.shape[-1])
    return AttentionWeights(wq, bq, wk, bk, wv, bv, wo, bias_of(dense["o"], wo.shape[-1:]))


def bias_of(layer, shape):
    """The layer's bias, or zeros of `shape` for a layer built with `use_bias=False`."""
    bias = getattr(layer, "bias", None)
    return np.zeros(shape) if bias is None else to_numpy(bias)


def feed_forward_weights(ffn):
    w1 = to_numpy(ffn.intermediate_dense.kernel)
    w2 = to_numpy(ffn.output_dense.kernel)
    return FeedForwardWeights(
        w1,
        bias_of(ffn.intermediate_dense, w1.shape[-1:]),
        w2,
        bias_of(ffn.output_dense, w2.shape[-1:]),
    )


def layer_norm_weights(norm):
    return LayerNormWeights(to_numpy(norm.gamma), to_numpy(norm.beta))


def copy_weights(source, target):
    """Copies every weight of the Keras layer `source` into `target` (same shapes, order)."""
    assert len(source.weights) == len(target.weights), (source.weights, target.weights)
    for src, dst in zip(source.weights, target.weights):
        assert tuple(src.shape) == tuple(dst.shape), (src.path, dst.path)
        dst.assign(src.value)


def padding_mask(lengths, max_length):
    """`(batch, max_length)` boolean, `True` on the first `lengths[b]` positions."""
    return np.arange(max_length)[None, :] < np.asarray(lengths)[:, None]


def encoder_block_reference(block, x, epsilon, mask=None, norm_first=False, activation=relu):
    """The reference encoder block with the weights of our `TransformerEncoderBlock`."""
    return encoder_block(
        x,
        attention_weights(block.self_attention),
        layer_norm_weights(block.self_attention_layer_norm),
        feed_forward_weights(block.feed_forward),
        layer_norm_weights(block.feed_forward_layer_norm),
        epsilon,
        mask=mask,
        norm_first=norm_first,
        activation=activation,
    )


def decoder_block_reference(
    block, x, memory, epsilon, self_mask=None, memory_mask=None, norm_first=False, activation=relu
):
    """The reference decoder block with the weights of our `TransformerDecoderBlock`."""
    return decoder_block(
        x,
        memory,
        attention_weights(block.self_attention),
        layer_norm_weights(block.self_attention_layer_norm),
        attention_weights(block.cross_attention_layer),
        layer_norm_weights(block.cross_attention_layer_norm),
        feed_forward_weights(block.feed_forward),
        layer_norm_weights(block.feed_forward_layer_norm),
        epsilon,
        self_mask=self_mask,
        memory_mask=memory_mask,
        norm_first=norm_first,
        activation=activation,
    )
