"""BERT's masking of tokens for masked-language-model pretraining, as TensorFlow ops."""

import tensorflow as tf

from keras_transformer.validation import is_int, is_real

_INT32_MAX = 2**31 - 1


def _check_rate(name, value):
    if not is_real(value) or not 0 <= value <= 1:
        raise ValueError(f"`{name}` must be a float in [0, 1]. Received: {name}={value!r}.")


def _check_arguments(
    mask_id, vocabulary_size, mask_rate, mask_token_rate, random_token_rate, max_predictions
):
    for name, value in (("mask_id", mask_id), ("vocabulary_size", vocabulary_size)):
        if not is_int(value) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative int. Received: {name}={value!r}.")
    if mask_id >= vocabulary_size:
        raise ValueError(
            f"`mask_id` ({mask_id}) must be below `vocabulary_size` ({vocabulary_size}). Use "
            "a tokenizer trained with `mask_token=True` and its `mask_id`."
        )
    _check_rate("mask_rate", mask_rate)
    if mask_rate == 0:
        raise ValueError("`mask_rate` must be above 0, e.g. 0.15 (BERT's).")
    _check_rate("mask_token_rate", mask_token_rate)
    _check_rate("random_token_rate", random_token_rate)
    if mask_token_rate + random_token_rate > 1:
        raise ValueError(
            "`mask_token_rate + random_token_rate` must be at most 1 (the rest keeps the "
            f"token). Received: {mask_token_rate} + {random_token_rate}."
        )
    if max_predictions is not None and (not is_int(max_predictions) or max_predictions < 1):
        raise ValueError(
            "`max_predictions` must be a positive int or None. "
            f"Received: max_predictions={max_predictions!r}."
        )


def _random_regular_ids(seed, shape, vocabulary_size, excluded):
    """Uniform ids in `[0, vocabulary_size)` that are not in `excluded` (sorted, unique)."""
    ids = tf.random.stateless_uniform(
        shape, seed, minval=0, maxval=vocabulary_size - len(excluded), dtype=tf.int32
    )
    # Shift past each excluded id in increasing order: a bijection onto the allowed ids.
    for excluded_id in excluded:
        ids += tf.cast(ids >= excluded_id, tf.int32)
    return ids


def _excluded_ids(special_ids, mask_id, pad_id, vocabulary_size):
    """The sorted ids never chosen nor drawn as random ids: specials, `mask_id`, `pad_id`."""
    for special_id in special_ids:
        if not is_int(special_id):
            raise ValueError(
                f"`special_ids` must hold int ids. Received: special_ids={special_ids!r}."
            )
        if not 0 <= special_id < vocabulary_size:
            raise ValueError(
                f"`special_ids` must lie in [0, vocabulary_size={vocabulary_size}). "
                f"Received: special_ids={special_ids!r}."
            )
    excluded = sorted(set(special_ids) | {mask_id, pad_id})
    if len(excluded) >= vocabulary_size:
        raise ValueError(
            f"`special_ids` and `mask_id` ({excluded}) leave no regular id in a vocabulary "
            f"of {vocabulary_size}."
        )
    return excluded


def _chosen_positions(token_ids, excluded, mask_rate, max_predictions, select_seed):
    """`(positions, used)`: each row's chosen positions, ascending, and the slots in use."""
    batch_size, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    maskable = tf.reduce_all(token_ids[..., None] != tf.constant(excluded, tf.int32), axis=-1)
    num_maskable = tf.reduce_sum(tf.cast(maskable, tf.int32), axis=1)
    num_chosen = tf.cast(tf.round(mask_rate * tf.cast(num_maskable, tf.float32)), tf.int32)
    num_chosen = tf.maximum(num_chosen, tf.minimum(num_maskable, 1))
    if max_predictions is not None:
        num_chosen = tf.minimum(num_chosen, max_predictions)
    num_predictions = tf.reduce_max(tf.concat([num_chosen, [0]], axis=0))

    # A random order of each row's maskable positions: the first `num_chosen` are chosen.
    scores = tf.random.stateless_uniform([batch_size, length], select_seed)
    scores = tf.where(maskable, scores, -1.0)
    by_score = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
    by_score = tf.cast(by_score[:, :num_predictions], tf.int32)
    used = tf.range(num_predictions)[None, :] < num_chosen[:, None]
    # Ascending positions, unused slots last, then pointing at position 0.
    positions = tf.sort(tf.where(used, by_score, length), axis=1)
    used = positions < length
    positions = tf.where(used, positions, 0)
    return positions, used


def mask_tokens(
    token_ids,
    mask_id,
    vocabulary_size,
    mask_rate=0.15,
    special_ids=(0, 2, 3),
    max_predictions=None,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    pad_id=0,
    seed=None,
):
    """Hides tokens for masked-language-model training, with BERT's 80/10/10 rule.

    In each row, `round(mask_rate * n)` of its `n` maskable tokens (at least
    one when `n > 0`, at most `max_predictions`) are chosen uniformly at
    random. Of the chosen, `mask_token_rate` (80%) become `mask_id`,
    `random_token_rate` (10%) a random id, and the rest (10%) stay as they
    are; the model must predict the original token at every chosen
    position. `special_ids` (padding, start, end), `pad_id` and `mask_id`
    are never chosen, and random ids are never one of them. It is made of TensorFlow
    ops, so it runs inside `tf.data.Dataset.map`.

    Args:
        token_ids: int tensor `(batch, length)`, or a `tf.RaggedTensor`
            (padded with `pad_id`).
        mask_id: int, the id that hides a token
            ([`SubwordTokenizer.mask_id`][keras_transformer.text.SubwordTokenizer.mask_id] of a
            tokenizer trained with `mask_token=True`).
        vocabulary_size: int, ids are in `[0, vocabulary_size)`.
        mask_rate: float in `(0, 1]`, share of the maskable tokens chosen.
            Defaults to `0.15`.
        special_ids: ints never chosen nor drawn as random ids. Defaults to
            `(0, 2, 3)`:
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer]'s pad,
            start and end ids.
        max_predictions: int, most chosen positions per row, or `None` (no
            limit). Defaults to `None`.
        mask_token_rate: float, share of the chosen tokens replaced by
            `mask_id`. Defaults to `0.8`.
        random_token_rate: float, share replaced by a random id. Defaults
            to `0.1`.
        pad_id: int, the label of an unused prediction slot. Defaults to `0`.
        seed: a stateless seed, an int tensor or tuple of shape `(2,)`: the
            same seed and input give the same masks. Defaults to `None` (a
            fresh random seed at each call).

    Returns:
        `(inputs, labels)`: `inputs` a dict with `"token_ids"` (int32, the
        input with its chosen tokens replaced) and `"mask_positions"` (int32
        `(batch, num_predictions)`, ascending positions of the chosen tokens,
        `0` in unused slots), `labels` int32 `(batch, num_predictions)`, the
        original tokens, `pad_id` in unused slots. `num_predictions` is the
        largest count of chosen tokens in the batch.

    Raises:
        ValueError: for a bad id, rate or count, `mask_id` outside the
            vocabulary, or `token_ids` that are not `(batch, length)`.

    Example:

    Seven maskable tokens: round(0.15 * 7) = 1 is chosen; its original id is
    the label, and the row keeps its special ids:

    >>> import tensorflow as tf
    >>> from keras_transformer.text import mask_tokens
    >>> ids = tf.constant([[2, 11, 12, 13, 14, 15, 16, 17, 3, 0]])
    >>> inputs, labels = mask_tokens(ids, mask_id=4, vocabulary_size=100, seed=(1, 2))
    >>> inputs["mask_positions"].shape.as_list(), labels.shape.as_list()
    ([1, 1], [1, 1])
    >>> position = int(inputs["mask_positions"][0, 0])
    >>> 1 <= position <= 7, int(labels[0, 0]) == int(ids[0, position])
    (True, True)
    >>> masked = inputs["token_ids"].numpy()[0].tolist()
    >>> masked[0], masked[-2:]
    (2, [3, 0])

    References:
        - [Devlin et al., 2019](https://arxiv.org/abs/1810.04805), "BERT",
          section 3.1 ("Task #1: Masked LM").
    """
    _check_arguments(
        mask_id, vocabulary_size, mask_rate, mask_token_rate, random_token_rate, max_predictions
    )
    excluded = _excluded_ids(special_ids, mask_id, pad_id, vocabulary_size)
    if isinstance(token_ids, tf.RaggedTensor):
        token_ids = token_ids.to_tensor(default_value=pad_id)
    token_ids = tf.cast(tf.convert_to_tensor(token_ids), tf.int32)
    if token_ids.shape.rank != 2:
        raise ValueError(
            f"`token_ids` must have shape `(batch, length)`. Received: shape={token_ids.shape}."
        )
    if seed is None:
        seed = tf.random.uniform([2], maxval=_INT32_MAX, dtype=tf.int32)
    select_seed, action_seed, random_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
    )

    positions, used = _chosen_positions(
        token_ids, excluded, mask_rate, max_predictions, select_seed
    )
    labels = tf.where(used, tf.gather(token_ids, positions, batch_dims=1), pad_id)

    action = tf.random.stateless_uniform(tf.shape(positions), action_seed)
    random_ids = _random_regular_ids(random_seed, tf.shape(positions), vocabulary_size, excluded)
    replacement = tf.where(
        action < mask_token_rate,
        mask_id,
        tf.where(action < mask_token_rate + random_token_rate, random_ids, labels),
    )
    batch_size = tf.shape(token_ids)[0]
    rows = tf.broadcast_to(tf.range(batch_size)[:, None], tf.shape(positions))
    indices = tf.boolean_mask(tf.stack([rows, positions], axis=-1), used)
    masked = tf.tensor_scatter_nd_update(token_ids, indices, tf.boolean_mask(replacement, used))
    return {"token_ids": masked, "mask_positions": positions}, labels
