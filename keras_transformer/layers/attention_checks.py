"""The argument checks of attention, its blocks and its stacks.

Each raises a `ValueError` that names the argument and the fix. `MultiHeadAttention` runs
them where a user first passes an argument (the constructor, `build`, `call`), and so do
the blocks and stacks, which build their attention layers later.
"""

from keras_transformer.ops.masks import check_mask_shape
from keras_transformer.validation import (
    check_one_of,
    check_positive_int,
    check_rank,
    check_rate,
    is_real,
)

# The positions attention itself can encode; absolute ones are added to the embeddings.
ATTENTION_POSITIONS = (None, "rotary", "alibi")


def check_attention_axes(attention_axes):
    """Raises a `ValueError` for an `attention_axes` other than Keras's default or 1."""
    if attention_axes not in (None, 1, (1,), [1]):
        raise ValueError(
            "This layer attends over axis 1 of `(batch, length, features)` inputs, so "
            f"`attention_axes` can only be None or 1. Received: "
            f"attention_axes={attention_axes!r}. Reshape other layouts to rank 3, or use "
            "`keras.layers.MultiHeadAttention`."
        )


def head_size(query_dim, num_heads, key_dim, relative_position):
    """`key_dim`, or `query_dim // num_heads` where it is `None`, checked for the positions."""
    if key_dim is None:
        if query_dim % num_heads:
            raise ValueError(
                f"The query width ({query_dim}) is not divisible by `num_heads` "
                f"({num_heads}), so `key_dim` cannot default to "
                "query_width // num_heads. Choose `num_heads` dividing the width or "
                "pass `key_dim` explicitly."
            )
        key_dim = query_dim // num_heads
    if relative_position == "rotary" and key_dim % 2:
        raise ValueError(
            '`relative_position="rotary"` turns pairs of features, so the head size must '
            f"be even. Received: key_dim={key_dim}. Pass an even `key_dim` (or a "
            "width and `num_heads` whose quotient is even)."
        )
    return key_dim


def check_call_masks(attention_mask, key_mask, query_length, key_length, num_heads):
    """Raises a `ValueError` for an attention mask or key mask that cannot broadcast.

    The attention mask is `(T, S)`, `(batch, T, S)` or `(batch, heads, T, S)`; the key mask
    `(batch, S)`. Lengths that are not Python ints (traced) are not compared.
    """
    static_query = query_length if isinstance(query_length, int) else None
    static_key = key_length if isinstance(key_length, int) else None
    check_mask_shape(attention_mask, static_query, static_key, ranks=(2, 3, 4))
    if attention_mask is not None and len(attention_mask.shape) == 4:
        if attention_mask.shape[1] not in (None, 1, num_heads):
            raise ValueError(
                "A rank-4 `attention_mask` is `(batch, num_heads, T, S)`: its axis 1 "
                f"must be {num_heads} (one mask per head) or 1. Received: "
                f"attention_mask.shape={tuple(attention_mask.shape)}."
            )
    # A block hands its `padding_mask` (or `decoder_padding_mask`, `encoder_padding_mask`)
    # over as `key_mask`: the message names both.
    check_mask_shape(
        key_mask, None, static_key, name="key_mask` (a block's padding mask", ranks=(2,)
    )


def check_call(value, precomputed, flash_attention, return_attention_scores):
    """Raises a `ValueError` naming the argument and the fix for a call that cannot run."""
    if value is None and not precomputed:
        raise ValueError(
            "`value` is required unless a precomputed `cache` is passed without "
            "`cache_update_index`."
        )
    if flash_attention and return_attention_scores:
        raise ValueError(
            "`return_attention_scores=True` cannot be honoured with "
            "`flash_attention=True`: the flash kernel never forms the scores. Build the "
            "layer with `flash_attention=None` (or False) to get them."
        )


def renamed_position(config):
    """`config` with the earlier `position` argument under its name `relative_position`.

    Blocks and stacks took the model's choice of positions as `position`, of which only
    `"rotary"` and `"alibi"` reach attention; the absolute ones become `None`.
    """
    if "position" not in config:
        return config
    config = dict(config)
    position = config.pop("position")
    config.setdefault("relative_position", position if position in ATTENTION_POSITIONS else None)
    return config


def reject_position(kwargs, owner):
    """Raises a `ValueError` naming the new name if `kwargs` holds the earlier `position`."""
    if "position" in kwargs:
        raise ValueError(
            f'{owner} takes `relative_position` ("rotary", "alibi" or None), the positions '
            "attention encodes, instead of `position`, which names a model's choice of "
            'positions. Rename the argument; absolute positions ("sinusoidal", "learned") '
            "are None here. Received: position={kwargs['position']!r}."
        )


def check_attention_arguments(
    num_heads,
    key_dim=None,
    num_key_value_heads=None,
    sliding_window=None,
    dropout=0.0,
    flash_attention=None,
    relative_position=None,
    max_wavelength=10000,
    dropout_name="dropout",
):
    """Raises a `ValueError`, naming the argument and the fix, for attention arguments.

    Run where a user first passes them: by `MultiHeadAttention` and by the blocks and
    stacks, which build their attention layers later (`dropout_name` is their name for
    the attention dropout).
    """
    check_positive_int("num_heads", num_heads)
    for name, value in (
        ("key_dim", key_dim),
        ("num_key_value_heads", num_key_value_heads),
        ("sliding_window", sliding_window),
    ):
        check_positive_int(name, value, allow_none=True)
    if num_key_value_heads is not None and num_heads % num_key_value_heads:
        raise ValueError(
            f"`num_key_value_heads` ({num_key_value_heads}) must divide `num_heads` "
            f"({num_heads}): each key/value head serves an equal group of query heads. "
            "Pick a divisor of `num_heads`."
        )
    check_rate(dropout_name, dropout)
    if flash_attention and dropout > 0:
        raise ValueError(
            f"`flash_attention=True` cannot be honoured with `{dropout_name}={dropout}`: the "
            f"flash kernel has no dropout. Pass `{dropout_name}=0.0`, or "
            "`flash_attention=None` to use the flash kernel only where it can run."
        )
    check_relative_position(relative_position, max_wavelength, flash_attention)


def check_relative_position(position, max_wavelength, flash_attention):
    """Raises a `ValueError` for a `relative_position` or `max_wavelength` the layer cannot use."""
    if position in ("sinusoidal", "learned"):
        raise ValueError(
            f"`relative_position={position!r}`: that is an absolute position, added to the "
            "embeddings (`TokenAndPositionEmbedding`), not something attention computes. "
            'Pass `relative_position=None` here, or "rotary" or "alibi".'
        )
    check_one_of("relative_position", position, ATTENTION_POSITIONS)
    if not is_real(max_wavelength) or max_wavelength <= 1:
        raise ValueError(
            "`max_wavelength` must be a number greater than 1 (the rotary angles' longest "
            f"wavelength, 10000 in Su et al.). Received: max_wavelength={max_wavelength!r}."
        )
    if position == "alibi" and flash_attention:
        raise ValueError(
            '`relative_position="alibi"` cannot be honoured with `flash_attention=True`: its '
            "bias is added to the logits on the explicit path. Pass `flash_attention=None` or "
            "False."
        )


def resolve_output_dim(output_dim, output_shape):
    """`output_dim` from it or from Keras's `output_shape` (an int or a 1-tuple)."""
    if output_shape is None:
        return output_dim
    shape = (output_shape,) if isinstance(output_shape, int) else output_shape
    if not isinstance(shape, (tuple, list)) or len(shape) != 1:
        raise ValueError(
            "`output_shape` must be an int or a one-element tuple: this layer's output is "
            f"`(batch, length, output_dim)`. Received: output_shape={output_shape!r}. Reshape "
            "the output for more axes."
        )
    check_positive_int("output_shape", shape[0])
    if output_dim is not None and output_dim != shape[0]:
        raise ValueError(
            f"`output_shape` ({output_shape!r}) and `output_dim` ({output_dim!r}) disagree; "
            "they name the same thing. Pass one of them."
        )
    return shape[0]


def check_input_shapes(query_shape, value_shape, key_shape):
    """Raises a `ValueError` for a query, value or key the layer cannot attend with."""
    for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
        if shape is not None:
            check_rank(name, shape, 3, "`(batch, length, features)`")
    if value_shape is None or key_shape is None:
        return
    value_length, key_length = value_shape[1], key_shape[1]
    if value_length is not None and key_length is not None and value_length != key_length:
        raise ValueError(
            "`key` and `value` must have the same length (axis 1): each key names the value "
            f"at its position. Received: key.shape={tuple(key_shape)} and "
            f"value.shape={tuple(value_shape)}."
        )
