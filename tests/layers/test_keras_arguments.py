"""Keras's `MultiHeadAttention` arguments on our layers: contract, errors, differences.

The numbers against Keras's own layer are in `tests/reference/test_keras_conventions.py`;
`docs/layers.md` ("Differences from `keras.layers.MultiHeadAttention`") lists what this
file holds the layers to.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import (
    FeedForward,
    MultiHeadAttention,
    TokenAndPositionEmbedding,
    TransformerDecoder,
    TransformerEncoderBlock,
)
from keras_transformer.ops import scaled_dot_product_attention, sliding_window_mask
from tests.harness import check_quantization_and_lora, run_layer_test

B, T, S, D = 2, 5, 7, 16

KERAS_ARGUMENTS = dict(
    use_gate=True,
    sliding_window=2,
    kernel_regularizer="l2",
    bias_regularizer=keras.regularizers.L1(0.01),
    activity_regularizer="l1",
    kernel_constraint="max_norm",
    bias_constraint=keras.constraints.NonNeg(),
)


def test_layer_contract_with_keras_arguments(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    # Config, `.keras` saving, XLA, a `fit` step, gradients and mixed precision.
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 4, **KERAS_ARGUMENTS},
        {"query": x, "value": x},
        (B, T, D),
        call_kwargs={"use_causal_mask": True},
        expected_num_trainable_weights=10,
        run_quantization=False,  # Keras refuses LoRA on a kernel with a constraint
    )
    # Quantisation and LoRA reach the gate (unconstrained).
    inputs = keras.Input((T, D))
    layer = MultiHeadAttention(num_heads=4, use_gate=True)
    model = keras.Model(inputs, layer(inputs, inputs))
    check_quantization_and_lora(model, x)


def test_gate_honours_its_lora_delta(rng):
    x = ops.convert_to_tensor(rng.standard_normal((B, T, D)).astype("float32"))
    layer = MultiHeadAttention(num_heads=4, use_gate=True)
    layer.build(x.shape, x.shape)
    layer.gate_dense.enable_lora(2)
    layer.gate_dense.lora_kernel_b.assign(rng.standard_normal((2, 4)).astype("float32"))
    merged = MultiHeadAttention(num_heads=4, use_gate=True)
    merged.build(x.shape, x.shape)
    for name in ("query_dense", "key_dense", "value_dense", "gate_dense", "output_dense"):
        # `kernel` of a LoRA layer is the frozen kernel plus the low-rank delta.
        getattr(merged, name).kernel.assign(getattr(layer, name).kernel)
        getattr(merged, name).bias.assign(getattr(layer, name).bias)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(x, x)), ops.convert_to_numpy(merged(x, x)), atol=1e-6
    )


def test_regularizers_and_constraints_reach_every_layer_that_owns_projections():
    options = dict(kernel_regularizer="l2", kernel_constraint="non_neg")
    ffn = FeedForward(32, **options)
    ffn.build((None, T, D))
    assert len(ffn.losses) == 2
    assert all(w.constraint is not None for w in ffn.weights if w.path.endswith("kernel"))
    embedding = TokenAndPositionEmbedding(
        20, D, embeddings_regularizer="l2", embeddings_constraint="non_neg"
    )
    embedding.build((None, T))
    assert len(embedding.losses) == 1 and embedding.embeddings.constraint is not None
    decoder = TransformerDecoder(2, num_heads=4, intermediate_dim=32, **options)
    decoder.build((None, T, D), (None, S, D))
    # Per block: self-attention 4, cross-attention 4, feed-forward 2 kernels.
    assert len(decoder.losses) == 20
    config = TransformerDecoder.from_config(decoder.get_config()).get_config()
    assert config["kernel_regularizer"]["class_name"] == "L2"
    assert config["kernel_constraint"]["class_name"] == "NonNeg"


def test_activity_regularizer_is_per_projection_not_on_the_output(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    layer = MultiHeadAttention(num_heads=4, activity_regularizer="l2")
    layer(x, x)
    assert layer.activity_regularizer is None  # the base layer's: the output is left alone
    assert len(layer.losses) == 4


def test_block_sliding_window_is_on_self_attention_only():
    block = TransformerEncoderBlock(num_heads=4, intermediate_dim=32, sliding_window=3)
    block.build((None, T, D))
    assert block.self_attention.sliding_window == 3
    decoder = TransformerDecoder(1, num_heads=4, intermediate_dim=32, sliding_window=3)
    decoder.build((None, T, D), (None, S, D))
    assert decoder.blocks[0].self_attention.sliding_window == 3
    assert decoder.blocks[0].cross_attention_layer.sliding_window is None


def test_sliding_window_mask_is_a_band():
    band = ops.convert_to_numpy(sliding_window_mask(3, 6, 2, start_index=2)).astype(int)
    assert band.tolist() == [[0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sliding_window": 0}, "`sliding_window` must be a positive integer"),
        ({"use_gate": "yes"}, "`use_gate` must be True or False"),
        ({"kernel_regularizer": "l3"}, "`kernel_regularizer` must be a Keras regularizer"),
        ({"bias_constraint": "positive"}, "`bias_constraint` must be a Keras constraint"),
        ({"output_shape": (4, 4)}, "`output_shape` must be an int or a one-element tuple"),
        ({"output_shape": 8.0}, "`output_shape` must be an int or a one-element tuple"),
        ({"output_shape": (0,)}, "`output_shape` must be a positive integer"),
        ({"output_shape": 8, "output_dim": 9}, "`output_shape` .* and `output_dim` .* disagree"),
        ({"flash_attention": True, "dropout": 0.1}, "`flash_attention=True` cannot be honoured"),
    ],
)
def test_bad_keras_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(num_heads=2, **kwargs)


def test_block_refuses_flash_attention_with_attention_dropout():
    with pytest.raises(ValueError, match="`flash_attention=True` cannot be honoured"):
        TransformerEncoderBlock(2, 8, attention_dropout=0.1, flash_attention=True)


def test_output_shape_is_kerass_name_for_output_dim():
    for output_shape in (9, (9,)):
        layer = MultiHeadAttention(num_heads=2, output_shape=output_shape)
        assert layer.output_dim == 9
        assert "output_shape" not in layer.get_config()


def test_attention_axes_other_than_axis_1_are_refused():
    assert MultiHeadAttention(num_heads=2, attention_axes=(1,)).num_heads == 2
    with pytest.raises(ValueError, match="`attention_axes` can only be None or 1"):
        MultiHeadAttention(num_heads=2, attention_axes=(1, 2))


def test_kerass_positional_order_fails_with_a_clear_error():
    # Keras: (num_heads, key_dim, value_dim, dropout); ours has num_key_value_heads fourth.
    with pytest.raises(ValueError, match="`num_key_value_heads` must be a positive integer"):
        MultiHeadAttention(2, 4, 4, 0.1)


def test_flash_attention_is_enforced(rng, monkeypatch):
    x = rng.standard_normal((B, T, D)).astype("float32")
    with pytest.raises(ValueError, match="`return_attention_scores=True` cannot be honoured"):
        MultiHeadAttention(num_heads=2, flash_attention=True)(x, x, return_attention_scores=True)
    # Keras's global setting counts when the layer leaves the choice open.
    monkeypatch.setattr(keras.config, "is_flash_attention_enabled", lambda: True)
    with pytest.raises(ValueError, match="`return_attention_scores=True` cannot be honoured"):
        MultiHeadAttention(num_heads=2)(x, x, return_attention_scores=True)
    # An explicit choice wins over the global setting (Keras lets the global one win).
    MultiHeadAttention(num_heads=2, flash_attention=False)(x, x, return_attention_scores=True)
    q = ops.ones((B, T, 2, 4))
    with pytest.raises(ValueError, match=r"value head size \(3\) differs"):
        scaled_dot_product_attention(q, q, ops.ones((B, T, 2, 3)), flash_attention=True)
    with pytest.raises(ValueError, match="dropout is active"):
        scaled_dot_product_attention(q, q, q, dropout=0.1, training=True, flash_attention=True)


def test_key_and_value_lengths_are_checked_before_any_tensor_flows():
    layer = MultiHeadAttention(num_heads=2)
    message = r"`key` and `value` must have the same length.*key.shape=\(2, 6, 8\)"
    with pytest.raises(ValueError, match=message):
        layer.compute_output_shape((2, 5, 8), (2, 7, 8), (2, 6, 8))
    with pytest.raises(ValueError, match=message):
        layer(keras.Input((5, 8), batch_size=2), keras.Input((7, 8), batch_size=2),
              key=keras.Input((6, 8), batch_size=2))  # fmt: skip
    with pytest.raises(ValueError, match=r"`key` must have rank 3.*key.shape=\(8,\)"):
        layer(np.zeros((2, 5, 8)), np.zeros((2, 7, 8)), key=np.zeros((8,)))


def test_per_head_mask_of_the_wrong_head_count_is_an_error(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    with pytest.raises(ValueError, match="its axis 1 must be 4 .* or 1"):
        MultiHeadAttention(num_heads=4)(x, x, attention_mask=np.ones((B, 3, T, T), bool))


@pytest.mark.parametrize("seed, equal", [(1, True), (None, False)])
def test_seeded_initializers_repeat_across_projections_as_in_keras(seed, equal):
    initializer = keras.initializers.GlorotUniform(seed=seed)
    ours = MultiHeadAttention(num_heads=2, key_dim=4, kernel_initializer=initializer)
    ours.build((None, T, 8))
    theirs = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, kernel_initializer=initializer)
    theirs.build((None, T, 8), (None, T, 8))
    for layer, query, key in (
        (ours, ours.query_dense, ours.key_dense),
        (theirs, theirs.query_dense, theirs.key_dense),
    ):
        same = np.array_equal(ops.convert_to_numpy(query.kernel), ops.convert_to_numpy(key.kernel))
        assert same == equal, type(layer).__module__
