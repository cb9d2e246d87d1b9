"""Attention maths and masks, on `keras.ops` only."""

from keras_transformer.ops.attention import scaled_dot_product_attention
from keras_transformer.ops.masks import (
    causal_mask,
    get_keras_mask,
    merge_masks,
    padding_to_attention_mask,
)

__all__ = [
    "causal_mask",
    "get_keras_mask",
    "merge_masks",
    "padding_to_attention_mask",
    "scaled_dot_product_attention",
]
