"""Boolean attention masks: `True` means "may attend", `False` means "masked out"."""

from keras import ops

from keras_transformer import compat


def get_keras_mask(x):
    """Returns the Keras mask attached to `x` by a previous layer, or `None`.

    A layer such as `keras.layers.Embedding(mask_zero=True)` attaches a padding
    mask to its output; our layers read it with this function so that they
    work with Keras masks on every backend (JAX arrays keep it in a side table).

    Args:
        x: a tensor, or `None`.

    Returns:
        The boolean mask Keras attached to `x`, or `None` if there is none or
        `x` is `None`.

    Example:

    >>> import keras
    >>> embedded = keras.layers.Embedding(10, 4, mask_zero=True)(ops.array([[3, 5, 0]]))
    >>> ops.convert_to_numpy(get_keras_mask(embedded)).tolist()
    [[True, True, False]]
    >>> get_keras_mask(ops.ones((1, 3))) is None
    True
    """
    if x is None:
        return None
    return compat.get_keras_mask(x)


def causal_mask(query_length, key_length=None, start_index=0):
    """Lower-triangular mask of shape `(query_length, key_length)`.

    Query `i` sits at absolute position `start_index + i` and may attend to keys
    `0 .. start_index + i`. With `start_index=0` and equal lengths this is the
    usual `tril` of the paper's decoder.

    Args:
        query_length: int or scalar tensor, number of query positions.
        key_length: int or scalar tensor, number of key positions. Defaults to
            `query_length`.
        start_index: int or scalar tensor, absolute position of the first query
            (the decoding step when a cache is used). Defaults to `0`.

    Returns:
        A boolean tensor of shape `(query_length, key_length)`, `True` where
        the query may attend to the key.

    Example:

    >>> ops.convert_to_numpy(causal_mask(3)).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]

    One query at decoding step 2 of a 4-slot cache sees keys 0 to 2:

    >>> ops.convert_to_numpy(causal_mask(1, 4, start_index=2)).astype(int).tolist()
    [[1, 1, 1, 0]]
    """
    if key_length is None:
        key_length = query_length
    positions, keys = absolute_positions(query_length, key_length, start_index)
    return ops.less_equal(keys, positions)


def sliding_window_mask(query_length, key_length, window, start_index=0):
    """Band mask of shape `(query_length, key_length)`: keys within `window - 1` positions.

    Query `i` sits at absolute position `start_index + i` and may attend to key
    `j` when `|start_index + i - j| < window`, a symmetric band as in Keras's
    [`MultiHeadAttention(sliding_window=...)`][keras_transformer.layers.MultiHeadAttention]. With a
    causal mask it is the causal sliding window of Longformer and Mistral: each
    query sees itself and the `window - 1` keys before it.

    Args:
        query_length: int or scalar tensor, number of query positions.
        key_length: int or scalar tensor, number of key positions.
        window: positive int, the width of the band on each side, counting the
            diagonal.
        start_index: int or scalar tensor, absolute position of the first query
            (the decoding step when a cache is used). Defaults to `0`.

    Returns:
        A boolean tensor of shape `(query_length, key_length)`, `True` inside
        the band.

    Example:

    >>> ops.convert_to_numpy(sliding_window_mask(4, 4, 2)).astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]

    References:
        - [Beltagy et al., 2020](https://arxiv.org/abs/2004.05150) (Longformer)
    """
    positions, keys = absolute_positions(query_length, key_length, start_index)
    return ops.less(ops.abs(positions - keys), window)


def absolute_positions(query_length, key_length, start_index):
    """The queries' absolute positions `(T, 1)` and the keys' `(1, S)`, int32."""
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32"), 1)
    keys = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    return rows + ops.cast(start_index, "int32"), keys


def padding_to_attention_mask(padding_mask):
    """`(batch, key_length)` padding mask → `(batch, 1, key_length)` attention mask.

    Padded keys are masked for every query; padded queries still attend to the
    real keys, so no row is fully masked.

    Args:
        padding_mask: boolean or 0/1 tensor of shape `(batch, key_length)`,
            `True` (or 1) for real tokens.

    Returns:
        A boolean tensor of shape `(batch, 1, key_length)`, which broadcasts
        over the query axis of `(batch, query_length, key_length)`.

    Example:

    >>> mask = padding_to_attention_mask(ops.array([[1, 1, 0]]))
    >>> tuple(mask.shape)
    (1, 1, 3)
    >>> ops.convert_to_numpy(mask).tolist()
    [[[True, True, False]]]
    """
    padding_mask = ops.cast(padding_mask, "bool")
    return ops.expand_dims(padding_mask, axis=1)


def merge_masks(*masks):
    """Logical AND of the masks that are not `None` (broadcasting), or `None`.

    Args:
        *masks: boolean (or 0/1) tensors that broadcast together, or `None`.

    Returns:
        A boolean tensor, the AND of the given masks broadcast to a common
        shape, or `None` if every mask is `None`.

    Example:

    A padding mask (the third key is padding) and a causal mask:

    >>> padding = padding_to_attention_mask(ops.array([[1, 1, 0]]))
    >>> merged = merge_masks(padding, causal_mask(3), None)
    >>> ops.convert_to_numpy(merged[0]).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 0]]
    >>> merge_masks(None, None) is None
    True
    """
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def check_mask_shape(mask, query_length, key_length, name="attention_mask", ranks=(2, 3)):
    """Raises a `ValueError` naming `name` if `mask` cannot broadcast to `(..., T, S)`."""
    if mask is None:
        return
    shape = tuple(mask.shape)
    expected = f"(batch_size, {query_length}, {key_length})"
    if len(shape) not in ranks:
        raise ValueError(
            f"`{name}` must have rank {' or '.join(map(str, ranks))} and broadcast to "
            f"{expected}. Received: {name}.shape={shape}. Pass a boolean mask whose last "
            "two axes are the query and key lengths."
        )
    for dim, size, what in ((shape[-2], query_length, "query"), (shape[-1], key_length, "key")):
        if dim is not None and size is not None and dim not in (1, size):
            raise ValueError(
                f"`{name}` must broadcast to {expected}, but its {what} axis has length "
                f"{dim} instead of {size}. Received: {name}.shape={shape}."
            )
