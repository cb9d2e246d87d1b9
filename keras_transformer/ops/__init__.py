"""Attention maths, masks, dropout and the smoothed cross-entropy, on `keras.ops` only."""

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

__all__ = [
    "causal_mask",
    "dropout",
    "get_keras_mask",
    "label_smoothed_cross_entropy",
    "layer_normalization",
    "merge_masks",
    "padding_to_attention_mask",
    "scaled_dot_product_attention",
    "sliding_window_mask",
]
