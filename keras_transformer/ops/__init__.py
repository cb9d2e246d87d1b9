"""Attention maths, masks, rotary and ALiBi positions, dropout and the smoothed
cross-entropy, on `keras.ops` only."""

from keras_transformer.ops.alibi import alibi_bias, alibi_slopes
from keras_transformer.ops.attention import scaled_dot_product_attention
from keras_transformer.ops.cross_entropy import label_smoothed_cross_entropy
from keras_transformer.ops.dropout import dropout
from keras_transformer.ops.layer_norm import layer_normalization
from keras_transformer.ops.masks import (
    causal_mask,
    get_keras_mask,
    merge_masks,
    padding_to_attention_mask,
    sliding_window_mask,
)
from keras_transformer.ops.rotary import apply_rotary_embedding, rotary_angles

__all__ = [
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary_embedding",
    "causal_mask",
    "dropout",
    "get_keras_mask",
    "label_smoothed_cross_entropy",
    "layer_normalization",
    "merge_masks",
    "padding_to_attention_mask",
    "rotary_angles",
    "scaled_dot_product_attention",
    "sliding_window_mask",
]
