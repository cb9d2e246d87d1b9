"""Scaled dot-product attention, softmax(QKᵀ/√d_k)V (Vaswani et al., 2017, eq. 1)."""

import math

from keras import ops

from keras_transformer.ops.backend_paths import fused_attention_kernel, fused_attention_pays
from keras_transformer.ops.dropout import dropout as dropout_op
from keras_transformer.ops.masks import causal_mask, check_mask_shape, merge_masks

# A large negative logit instead of -inf: a row with every key masked then gives a
# uniform (finite) softmax, which is zeroed afterwards instead of turning into NaN.
_MASKED_LOGIT = -1e9


def _as_rank4_mask(mask):
    """Reshapes a mask to broadcast against `(batch, heads, T, S)` logits."""
    mask = ops.cast(mask, "bool")
    rank = len(mask.shape)
    if rank == 2:  # (T, S)
        return mask[None, None, :, :]
    if rank == 3:  # (B, T, S)
        return ops.expand_dims(mask, axis=1)
    if rank == 4:
        return mask
    raise ValueError(f"`mask` must have rank 2, 3 or 4. Received: mask.shape={mask.shape}.")


def _check_inputs(query, key, value):
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if len(tensor.shape) != 4:
            raise ValueError(
                f"`{name}` must have rank 4, `(batch, length, num_heads, head_dim)`. "
                f"Received: {name}.shape={tuple(tensor.shape)}. Reshape the projected "
                "tensor to split the heads, or use `MultiHeadAttention`."
            )
    q_dim, k_dim = query.shape[-1], key.shape[-1]
    if q_dim is not None and k_dim is not None and q_dim != k_dim:
        raise ValueError(
            "`query` and `key` must have the same head size (last axis) to be dotted; "
            f"received query.shape={tuple(query.shape)} and key.shape={tuple(key.shape)}. "
            "Project them to a common `key_dim` first."
        )
    k_len, v_len = key.shape[1], value.shape[1]
    if k_len is not None and v_len is not None and k_len != v_len:
        raise ValueError(
            "`key` and `value` must have the same length (axis 1); received "
            f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}."
        )
    if key.shape[2] != value.shape[2]:
        raise ValueError(
            "`key` and `value` must have the same number of heads (axis 2); received "
            f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}."
        )
    q_heads, kv_heads = query.shape[2], key.shape[2]
    if q_heads is not None and kv_heads is not None and q_heads % kv_heads:
        raise ValueError(
            f"The number of query heads ({q_heads}) must be a multiple of the number of "
            f"key/value heads ({kv_heads}) for grouped-query attention."
        )


def _check_flash_attention(dropout_active, return_attention_scores, query, value, bias=None):
    """Raises a `ValueError` where `flash_attention=True` cannot be honoured."""
    if bias is not None:
        reason = "a logit bias was given (it is added in float32 on the explicit path)"
    elif dropout_active:
        reason = "dropout is active (the flash kernel has none)"
    elif return_attention_scores:
        reason = "attention scores were requested (the flash kernel never forms them)"
    elif value.shape[-1] != query.shape[-1]:
        reason = (
            f"the value head size ({value.shape[-1]}) differs from the query's ({query.shape[-1]})"
        )
    else:
        return
    raise ValueError(
        f"`flash_attention=True` cannot be honoured: {reason}. Pass `flash_attention=None` "
        "to use the flash kernel only where it can run."
    )


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    is_causal=False,
    dropout=0.0,
    return_attention_scores=False,
    training=None,
    scale=None,
    seed=None,
    flash_attention=None,
    bias=None,
):
    r"""Scaled dot-product attention, $\operatorname{softmax}(QK^\top/\sqrt{d_k} + B)\,V$.

    Uses the fused `keras.ops.dot_product_attention` (a flash kernel where the
    backend and device have one) when no dropout is active and no attention
    scores are requested, and an explicit einsum-softmax-einsum path otherwise
    and on TensorFlow, which has no fused kernel (the explicit path is faster
    there; a single query row, as in a cached decoding step, is multiplied and
    summed against the keys and values instead of batch-multiplied).
    On JAX with an NVIDIA GPU, bfloat16 or float16 heads of at most 128 features
    and `is_causal` with no other mask run on cuDNN's fused kernel with its causal
    flag, through JAX itself.
    Both compute the softmax in float32 whatever the input dtype. Query rows
    whose keys are all masked return zeros (and zero scores), never NaN.

    Grouped-query attention: `key` and `value` may have fewer heads than
    `query`, as long as they divide it; each key/value head then serves a group
    of consecutive query heads.

    Args:
        query: tensor of shape `(batch, target_length, num_heads, head_dim)`.
        key: tensor of shape `(batch, source_length, num_kv_heads, head_dim)`.
        value: tensor of shape `(batch, source_length, num_kv_heads, value_dim)`.
        mask: optional boolean tensor broadcastable to
            `(batch, num_heads, target_length, source_length)`; rank 2 `(T, S)`
            and rank 3 `(B, T, S)` masks are accepted too. `True` means attend.
            Defaults to `None`.
        is_causal: bool, whether query `i` may only attend to keys `<= i`.
            Defaults to `False`.
        dropout: float in `[0, 1)`, dropout rate on the attention
            probabilities, active only when `training` is truthy. Defaults to `0.0`.
        return_attention_scores: bool, also return the attention probabilities
            of shape `(batch, num_heads, target_length, source_length)`.
            Defaults to `False`.
        training: bool, whether dropout is active. Defaults to `None` (inactive).
        scale: float, the logit scale. Defaults to `1 / sqrt(head_dim)`.
        seed: int or `keras.random.SeedGenerator` for the dropout. Defaults to `None`.
        flash_attention: bool or `None`. `True` always takes the fused
            `keras.ops.dot_product_attention` with its flash kernel, and raises a
            `ValueError` where that cannot be honoured: active dropout, requested
            scores, a value head size other than the query's, or a backend or
            device without the kernel. Defaults to `None` (the fused path where it
            pays, the flash kernel where the backend has one).
        bias: optional float tensor $B$, broadcastable to
            `(batch, num_heads, target_length, source_length)`, added to the
            scaled logits in float32 before the softmax (ALiBi's distance
            penalty, [`keras_transformer.ops.alibi_bias`][]). A bias takes the
            explicit path, so that it is added in float32 under mixed precision.
            Defaults to `None`.

    Returns:
        The attended values, shape `(batch, target_length, num_heads, value_dim)`,
        or a tuple `(values, scores)` with `return_attention_scores=True`.

    Example:

    A batch of one, three positions, two heads of size 4. Each row of the
    causal scores sums to one, and position 0 only sees itself:

    >>> import keras
    >>> q = keras.random.normal((1, 3, 2, 4), seed=0)
    >>> values, scores = scaled_dot_product_attention(
    ...     q, q, q, is_causal=True, return_attention_scores=True
    ... )
    >>> tuple(values.shape), tuple(scores.shape)
    ((1, 3, 2, 4), (1, 2, 3, 3))
    >>> [round(float(x), 4) for x in ops.convert_to_numpy(ops.sum(scores[0, 0], axis=-1))]
    [1.0, 1.0, 1.0]
    >>> ops.convert_to_numpy(scores[0, 0, 0]).tolist()
    [1.0, 0.0, 0.0]

    A query whose keys are all masked gets zeros, never NaN:

    >>> none_visible = ops.zeros((1, 3), dtype="bool")
    >>> float(ops.max(ops.abs(scaled_dot_product_attention(q, q, q, mask=none_visible))))
    0.0

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.2.1.
    """
    query = ops.convert_to_tensor(query)
    key = ops.convert_to_tensor(key, dtype=query.dtype)
    value = ops.convert_to_tensor(value, dtype=query.dtype)
    _check_inputs(query, key, value)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout}.")
    if mask is not None:
        mask = ops.convert_to_tensor(mask)
        check_mask_shape(mask, query.shape[1], key.shape[1], name="mask", ranks=(2, 3, 4))
        mask = _as_rank4_mask(mask)
    dropout_active = bool(training) and dropout > 0.0
    if flash_attention:
        _check_flash_attention(dropout_active, return_attention_scores, query, value, bias)
    return attend(
        query,
        key,
        value,
        mask=mask,
        causal=is_causal,
        bias=bias,
        dropout=dropout if dropout_active else 0.0,
        seed=seed,
        scale=scale,
        flash_attention=flash_attention,
        return_attention_scores=return_attention_scores,
    )


def attend(
    query,
    key,
    value,
    *,
    mask=None,
    query_padding=None,
    key_padding=None,
    causal=False,
    bias=None,
    dropout=0.0,
    seed=None,
    scale=None,
    flash_attention=None,
    return_attention_scores=False,
    elementwise=None,
):
    """The attention itself, for callers that checked their arguments.

    `scaled_dot_product_attention` checks and normalises its arguments and calls
    this; so does `MultiHeadAttention`, which checks its own. The padding and
    causality come apart from any other mask, so that a fused kernel that takes
    them as lengths and a flag gets them so (`fused_attention_kernel`); every
    other path merges them into one boolean mask.

    Args:
        query, key, value: rank-4 tensors of one dtype, `(batch, length, heads, size)`;
            the key/value heads divide the query heads.
        mask: boolean tensor broadcastable to `(batch, heads, T, S)`, or `None`.
        query_padding: boolean `(batch, T)`, `False` at padded queries, or `None`.
        key_padding: boolean `(batch, S)`, `False` at padded keys, or `None`.
        causal: bool, query `t` attends keys `s <= t` only.
        bias: float tensor broadcastable to the logits, or `None`.
        dropout: float, the dropout rate on the probabilities (`0.0`: none).
        seed: `keras.random.SeedGenerator` or int for the dropout.
        scale: float or `None` (`1 / sqrt(head_dim)`).
        flash_attention: bool or `None`, handed to `keras.ops.dot_product_attention`.
        return_attention_scores: bool.
        elementwise: bool, multiply and sum each query against the keys and
            values, for a few queries on a long cache; `None` does so for a
            single query. Defaults to `None`.

    Returns:
        The attended values, or `(values, scores)`.
    """
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if elementwise is None:
        elementwise = query.shape[1] == 1
    kernel = _fused_kernel(
        query, key, value, mask, causal, bias, dropout, return_attention_scores,
        flash_attention, elementwise,
    )  # fmt: skip
    if kernel not in (None, "keras"):
        from keras_transformer.ops.cudnn_attention import padded_attention

        return padded_attention(
            query,
            key,
            value,
            scale=scale,
            causal=causal,
            query_padding=query_padding,
            key_padding=key_padding,
            implementation=kernel,
        )

    mask = merge_masks(
        None if query_padding is None else _expand(query_padding, (1, 3)),
        None if key_padding is None else _expand(key_padding, (1, 2)),
        mask,
        _expand(causal_mask(ops.shape(query)[1], ops.shape(key)[1]), (0, 1)) if causal else None,
    )
    num_heads, num_kv_heads = query.shape[2], key.shape[2]
    if num_kv_heads != num_heads:
        key = ops.repeat(key, num_heads // num_kv_heads, axis=2)
        value = ops.repeat(value, num_heads // num_kv_heads, axis=2)

    if kernel == "keras":
        outputs = ops.dot_product_attention(
            query, key, value, mask=mask, scale=scale, flash_attention=flash_attention
        )
        if mask is not None:
            # The fused kernel spreads a fully masked row uniformly; zero it instead.
            row_valid = ops.any(mask, axis=-1)  # (B|1, H|1, T)
            row_valid = ops.transpose(row_valid, (0, 2, 1))[..., None]
            outputs = outputs * ops.cast(row_valid, outputs.dtype)
        return outputs

    return _explicit_attention(
        query, key, value, mask, bias, dropout, seed, scale, return_attention_scores, elementwise
    )


def _expand(mask, axes):
    """`mask` with new axes, by `expand_dims`, which LiteRT's built-in operators cover."""
    mask = ops.cast(mask, "bool")
    for axis in axes:
        mask = ops.expand_dims(mask, axis)
    return mask


def _fused_kernel(
    query, key, value, mask, causal, bias, dropout, return_attention_scores, flash_attention,
    elementwise,
):  # fmt: skip
    """Which fused kernel `attend` runs, or `None` for the explicit path.

    A JAX implementation name (`fused_attention_kernel`: padding as lengths, causality as
    the flag) for several queries with no other mask; else `"keras"`, for
    `keras.ops.dot_product_attention`, where it pays. Dropout, scores and a bias need the
    explicit path; so does a value head size other than the query's, which neither takes.
    The JAX kernel's causal flag aligns query 0 with key 0: a prefill's queries, not a
    decoding step's.
    """
    head_dim = query.shape[-1]
    if dropout or return_attention_scores or bias is not None or value.shape[-1] != head_dim:
        return None
    if not (flash_attention or fused_attention_pays(query.dtype)):
        return None
    query_length, key_length = query.shape[1], key.shape[1]
    aligned = not causal or (None not in (query_length, key_length) and query_length <= key_length)
    if mask is None and aligned and not elementwise:
        kernel = fused_attention_kernel(query.dtype, head_dim, flash_attention)
        if kernel is not None:
            return kernel
    return "keras"


def _explicit_attention(
    query, key, value, mask, bias, dropout, seed, scale, return_attention_scores, elementwise
):
    """softmax(QKᵀ · scale + bias) V written out, the softmax in float32."""
    # A single query row (a cached decoding step) is multiplied and summed against the
    # keys and values: as a batched matmul, XLA first copies every cached key and value
    # into a heads-major layout, at every step.
    # The products are summed in float32 and rounded to the inputs' dtype where the matmul
    # rounds its result, so that a cached step matches the full pass under mixed precision.
    if elementwise:
        products = ops.cast(query, "float32")[:, :, None] * ops.cast(key, "float32")[:, None]
        logits = ops.cast(ops.cast(ops.sum(products, axis=-1), query.dtype), "float32")
        logits = ops.transpose(logits, (0, 3, 1, 2)) * scale  # (B, T, S, N) to (B, N, T, S)
    else:
        logits = ops.einsum("btnh,bsnh->bnts", query, key)
        logits = ops.cast(logits, "float32") * scale
    if bias is not None:
        logits = logits + ops.cast(bias, "float32")
    if mask is not None:
        logits = ops.where(mask, logits, _MASKED_LOGIT)
    if logits.shape[-1] == 1:
        # One key takes all the weight (Keras warns of a softmax over one entry).
        probs = ops.ones_like(logits)
    else:
        probs = ops.softmax(logits, axis=-1)
    if mask is not None:
        probs = probs * ops.cast(ops.any(mask, axis=-1, keepdims=True), probs.dtype)
    scores = probs
    if dropout:
        probs = dropout_op(probs, dropout, seed=seed)
    if elementwise:
        weights = ops.cast(ops.cast(probs, value.dtype), "float32")
        weights = ops.transpose(weights, (0, 2, 3, 1))[..., None]  # (B, T, S, N, 1)
        outputs = ops.sum(weights * ops.cast(value, "float32")[:, None], axis=2)
        outputs = ops.cast(outputs, value.dtype)
    else:
        outputs = ops.einsum("bnts,bsnh->btnh", ops.cast(probs, value.dtype), value)
    if return_attention_scores:
        return outputs, ops.cast(scores, query.dtype)
    return outputs
