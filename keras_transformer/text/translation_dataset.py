"""tf.data pipeline: sentence pairs → token-budget batches for teacher-forced training."""

import itertools
import random

import numpy as np
import tensorflow as tf

from keras_transformer.validation import is_int, is_real

_TOKENIZE_CHUNK = 1024
# Batches shuffled together after bucketing: all of an epoch of Multi30k (~140).
_BATCH_SHUFFLE_BUFFER = 1024


def length_bucket_boundaries(max_length, min_length=8, step=1.1):
    """Geometric bucket boundaries for batching sequences of similar length.

    Boundaries start at `min_length` and grow by `step` (by at least 1), so short
    sequences get fine buckets and long ones coarse buckets, keeping padding to
    roughly `step - 1` of the tokens. Bucket `i` holds lengths in
    `[boundaries[i - 1], boundaries[i])`.

    Args:
        max_length: int, longest sequence to bucket; the last boundary is
            `max_length + 1`.
        min_length: int, first boundary. Defaults to `8`.
        step: float > 1, growth factor between boundaries. Defaults to `1.1`.

    Returns:
        A sorted list of int boundaries, the last being `max_length + 1`.

    Raises:
        ValueError: for `step <= 1` or a length below 1.

    Example:

    >>> from keras_transformer.text import length_bucket_boundaries
    >>> length_bucket_boundaries(12)
    [8, 9, 10, 11, 12, 13]
    >>> length_bucket_boundaries(40, step=1.5)
    [8, 12, 18, 27, 40, 41]
    """
    if step <= 1:
        raise ValueError(f"`step` must be > 1. Received: step={step}")
    if min_length < 1 or max_length < 1:
        raise ValueError(
            f"`min_length` and `max_length` must be >= 1. Received: min_length={min_length}, "
            f"max_length={max_length}"
        )
    boundaries = []
    boundary = min_length
    while boundary <= max_length:
        boundaries.append(boundary)
        boundary = max(boundary + 1, int(boundary * step))
    boundaries.append(max_length + 1)
    return boundaries


def fixed_shape_lengths(max_length, min_length=16):
    """The few lengths that batches are padded to when their shapes must not vary.

    Under XLA (JAX, or TensorFlow with `jit_compile=True`) every new input shape
    compiles the training step anew, which costs seconds each on a CPU. With
    `fixed_shapes=True` the pipelines pad every batch to the first of these lengths
    that holds its longest sequence: the powers of two and their halfway points
    `1.5 * 2**k` (16, 24, 32, 48, 64, 96, 128, 192, 256, ...), multiples of 8 that
    suit accelerators, from `min_length` up to but not including `max_length`, then
    `max_length` itself. A sequence is padded by less than half its length (a third
    on average), against about 5% with
    [`length_bucket_boundaries`][keras_transformer.text.length_bucket_boundaries]'
    fine buckets: the price of compiling a handful of times instead of dozens.

    Args:
        max_length: int >= 1, the longest sequence; the last length.
        min_length: int >= 1, the shortest length. Defaults to `16`.

    Returns:
        A sorted list of int lengths, the last being `max_length`.

    Raises:
        ValueError: for a length below 1.

    Example:

    >>> from keras_transformer.text import fixed_shape_lengths
    >>> fixed_shape_lengths(256)
    [16, 24, 32, 48, 64, 96, 128, 192, 256]
    >>> fixed_shape_lengths(64), fixed_shape_lengths(100, min_length=8)
    ([16, 24, 32, 48, 64], [8, 12, 16, 24, 32, 48, 64, 96, 100])
    """
    for name, value in (("max_length", max_length), ("min_length", min_length)):
        if not is_int(value) or value < 1:
            raise ValueError(f"`{name}` must be an int >= 1. Received: {name}={value!r}")
    lengths = []
    power = 1
    while power < max_length:
        lengths.extend(
            length for length in (power, power + power // 2) if min_length <= length < max_length
        )
        power *= 2
    return sorted(set(lengths)) + [max_length]


def _rows_for_length(tokens_per_batch, length, multiple):
    """Pairs per batch of sequences padded to `length`: as many as the budget allows."""
    return max(multiple, tokens_per_batch // length // multiple * multiple)


def translation_batch_shapes(
    tokens_per_batch=4096, max_length=256, batch_size_multiple=1, lengths=None
):
    """Every `(rows, length)` that `make_translation_dataset(..., fixed_shapes=True)` yields.

    A batch of sequences padded to `length` holds `tokens_per_batch // length` pairs
    (rounded down to a multiple of `batch_size_multiple`, and at least one multiple),
    whether the bucket was full or not: a bucket's leftover pairs are completed with
    rows of padding. Encoder ids, decoder ids and labels all have the shape
    `(rows, length)`, so an XLA-compiled training step compiles at most once per entry,
    and evaluation on a dataset made the same way at most once per entry too.

    Args:
        tokens_per_batch: int, the token budget per side. Defaults to `4096`.
        max_length: int, the longest sequence kept. Defaults to `256`.
        batch_size_multiple: int, the data-parallel replicas. Defaults to `1`.
        lengths: list of int, the padded lengths. Defaults to
            [`fixed_shape_lengths(max_length)`][keras_transformer.text.fixed_shape_lengths].

    Returns:
        A list of `(rows, length)` int pairs, one per length, shortest first.

    Example:

    >>> from keras_transformer.text import translation_batch_shapes
    >>> translation_batch_shapes(tokens_per_batch=4096, max_length=64)
    [(256, 16), (170, 24), (128, 32), (85, 48), (64, 64)]
    """
    _check_batch_sizes(tokens_per_batch, max_length, 0, batch_size_multiple)
    lengths = _checked_lengths(lengths, max_length)
    return [
        (_rows_for_length(tokens_per_batch, length, batch_size_multiple), length)
        for length in lengths
    ]


def _checked_lengths(lengths, max_length):
    """`lengths` (default `fixed_shape_lengths(max_length)`), checked to cover `max_length`."""
    if lengths is None:
        return fixed_shape_lengths(max_length)
    lengths = list(lengths)
    valid = (
        lengths
        and all(is_int(length) and length >= 1 for length in lengths)
        and lengths == sorted(set(lengths))
        and lengths[-1] >= max_length
    )
    if not valid:
        raise ValueError(
            "`fixed_lengths` must be increasing ints >= 1 whose last is at least `max_length` "
            f"({max_length}), e.g. `fixed_shape_lengths({max_length})`. Received: "
            f"fixed_lengths={lengths!r}"
        )
    return [int(length) for length in lengths]


def _truncated(ids, max_length):
    if max_length is None:
        return ids
    if not is_int(max_length) or max_length < 2:
        raise ValueError(
            f"`max_length` must be None or an int >= 2 (room for one token and a special "
            f"id). Received: max_length={max_length!r}"
        )
    # Cut the sentence, not the special ids, so sequences still end in `end_id`.
    return ids[:, : max_length - 1]


def _source_layout(tokenizer, ids, max_length):
    """Ragged subword ids → encoder input: the (cut) ids, then `end_id`."""
    ids = _truncated(ids, max_length)
    end = tf.fill([ids.nrows(), 1], tf.constant(tokenizer.end_id, tf.int32))
    return tf.concat([ids, end], axis=1)


def _target_layout(tokenizer, ids, max_length):
    """Ragged subword ids → (`start_id` + ids, ids + `end_id`) for teacher forcing."""
    ids = _truncated(ids, max_length)
    start = tf.fill([ids.nrows(), 1], tf.constant(tokenizer.start_id, tf.int32))
    end = tf.fill([ids.nrows(), 1], tf.constant(tokenizer.end_id, tf.int32))
    return tf.concat([start, ids], axis=1), tf.concat([ids, end], axis=1)


def tokenize_source(tokenizer, texts, max_length=None):
    """Encoder input ids: the subword ids of each source sentence, then `end_id`.

    Use it both for training data and at translation time so the encoder always sees
    the same format.

    Args:
        tokenizer: a [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer].
        texts: str tensor (or list of str) of shape `(batch,)`.
        max_length: int, cut each sentence so that the output, end id included, is
            at most this long. Defaults to `None` (no limit).

    Returns:
        An int32 `tf.RaggedTensor` of shape `(batch, None)`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(
    ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
    ...     vocabulary_size=30, byte_fallback=False)
    >>> from keras_transformer.text import tokenize_source
    >>> ids = tokenize_source(tokenizer, ["Two dogs play.", "Zwei Hunde."])
    >>> [row[-1] for row in ids.to_list()] == [tokenizer.end_id] * 2
    True
    >>> tokenizer.decode(ids.to_tensor())  # padded with 0, which decodes to nothing
    ['Two dogs play.', 'Zwei Hunde.']
    >>> tokenize_source(tokenizer, ["Two dogs play."], max_length=3).row_lengths().numpy()
    array([3])
    """
    return _source_layout(tokenizer, tokenizer.tokenize(texts), max_length)


def tokenize_target(tokenizer, texts, max_length=None):
    """Teacher-forcing decoder inputs and labels for target sentences.

    Decoder inputs are `[start_id] + ids` and labels are `ids + [end_id]`, so the
    decoder at position `t` sees the target up to `t - 1` and predicts token `t`.

    Args:
        tokenizer: a [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer], or a
            [`MarianTokenizer`][keras_transformer.text.MarianTokenizer] (whose
            [`tokenize_target`][keras_transformer.text.MarianTokenizer.tokenize_target] splits the
            targets).
        texts: str tensor (or list of str) of shape `(batch,)`.
        max_length: int, cut each sentence so that both outputs are at most this
            long. Defaults to `None` (no limit).

    Returns:
        `(decoder_inputs, labels)`, two int32 `tf.RaggedTensor`s of shape
        `(batch, None)` with equal row lengths.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(
    ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
    ...     vocabulary_size=30, byte_fallback=False)
    >>> from keras_transformer.text import tokenize_target
    >>> decoder_inputs, labels = tokenize_target(tokenizer, ["Zwei Hunde."])
    >>> int(decoder_inputs[0, 0]) == tokenizer.start_id, int(labels[0, -1]) == tokenizer.end_id
    (True, True)
    >>> bool(tf.reduce_all(decoder_inputs[0, 1:] == labels[0, :-1]))
    True
    """
    # A MarianTokenizer splits the target language with its own SentencePiece model.
    tokenize = getattr(tokenizer, "tokenize_target", tokenizer.tokenize)
    return _target_layout(tokenizer, tokenize(texts), max_length)


def _as_pair_list(pairs):
    pairs = list(pairs)
    if not pairs:
        raise ValueError("`pairs` is empty; pass (source, target) sentence pairs.")
    if any(not isinstance(pair, (tuple, list)) or len(pair) != 2 for pair in pairs):
        raise ValueError(
            "`pairs` must hold (source, target) string pairs, e.g. the output of "
            f"`load_multi30k`. Received first item: {pairs[0]!r}"
        )
    return pairs


def _as_pair_dataset(pairs):
    if isinstance(pairs, tf.data.Dataset):
        return pairs
    sources, targets = zip(*_as_pair_list(pairs))
    return tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))


def _subword_dropouts(subword_dropout):
    """`(source, target)` dropout probabilities from a float or a pair of floats."""
    pair = subword_dropout
    if not isinstance(pair, (tuple, list)):
        pair = (pair, pair)
    valid = len(pair) == 2 and all(is_real(value) and 0 <= value < 1 for value in pair)
    if not valid:
        raise ValueError(
            "`subword_dropout` must be a float in [0, 1) (e.g. 0.1; 0 turns it off) or a "
            "(source, target) pair of them, e.g. (0.1, 0.0) for the source side only. "
            f"Received: subword_dropout={subword_dropout!r}"
        )
    return tuple(float(value) for value in pair)


def _sampled_ids_dataset(pairs, tokenizer, dropouts, seed, max_length):
    """(encoder ids, decoder ids, labels) per pair, split afresh on every pass."""
    pairs = _as_pair_list(pairs)
    sources = [source for source, _ in pairs]
    targets = [target for _, target in pairs]
    passes = itertools.count()
    base_seed = seed if seed is not None else random.SystemRandom().randrange(2**20)

    def generate():
        # Distinct seeds per pass and per side; within one process the same `seed`
        # repeats the passes (not between processes: see `tokenize_with_dropout`).
        pass_seed = (base_seed * 1000 + 2 * next(passes)) % 2**31
        source_ids = tokenizer.tokenize_with_dropout(sources, dropouts[0], seed=pass_seed)
        target_ids = tokenizer.tokenize_with_dropout(targets, dropouts[1], seed=pass_seed + 1)
        # A chunk at a time, as flat ids and row lengths: yielding pair by pair takes
        # ~10 s a pass over Multi30k, which would stall training at each epoch start.
        for begin in range(0, len(source_ids), _TOKENIZE_CHUNK):
            chunk_sources = source_ids[begin : begin + _TOKENIZE_CHUNK]
            chunk_targets = target_ids[begin : begin + _TOKENIZE_CHUNK]
            yield (
                np.fromiter(itertools.chain.from_iterable(chunk_sources), np.int32),
                np.array([len(ids) for ids in chunk_sources], np.int64),
                np.fromiter(itertools.chain.from_iterable(chunk_targets), np.int32),
                np.array([len(ids) for ids in chunk_targets], np.int64),
            )

    def to_examples(source_flat, source_lengths, target_flat, target_lengths):
        source_ids = tf.RaggedTensor.from_row_lengths(source_flat, source_lengths)
        target_ids = tf.RaggedTensor.from_row_lengths(target_flat, target_lengths)
        return (
            _source_layout(tokenizer, source_ids, max_length),
            *_target_layout(tokenizer, target_ids, max_length),
        )

    flat = tf.TensorSpec([None], tf.int32)
    lengths = tf.TensorSpec([None], tf.int64)
    dataset = tf.data.Dataset.from_generator(
        generate, output_signature=(flat, lengths, flat, lengths)
    )
    return dataset.map(to_examples).unbatch().map(lambda *ids: ids)


def _check_batch_sizes(tokens_per_batch, max_length, min_tokens_per_batch, batch_size_multiple):
    """Returns `None`; raises `ValueError` for sizes that cannot form budgeted batches."""
    for name, value in (("tokens_per_batch", tokens_per_batch), ("max_length", max_length)):
        if not is_int(value) or value < 2:
            raise ValueError(f"`{name}` must be an int >= 2. Received: {name}={value!r}")
    if not is_int(batch_size_multiple) or batch_size_multiple < 1:
        raise ValueError(
            "`batch_size_multiple` must be a positive int, e.g. the data-parallel size of a "
            f"device mesh. Received: batch_size_multiple={batch_size_multiple!r}"
        )
    if max_length > tokens_per_batch:
        raise ValueError(
            f"`max_length` ({max_length}) must be <= `tokens_per_batch` ({tokens_per_batch}), "
            "or a single pair could not fit in a batch. Raise `tokens_per_batch` or lower "
            "`max_length`."
        )
    if not is_int(min_tokens_per_batch) or not 0 <= min_tokens_per_batch <= tokens_per_batch:
        raise ValueError(
            "`min_tokens_per_batch` must be an int between 0 and `tokens_per_batch` "
            f"({tokens_per_batch}), e.g. a quarter of it. Received: "
            f"min_tokens_per_batch={min_tokens_per_batch!r}"
        )


def _tokenized_pairs(pairs, tokenizer, subword_dropouts, seed, cut_to):
    """A dataset of `(encoder ids, decoder ids, labels)` per pair, cut to `cut_to` if set."""
    if any(subword_dropouts):
        return _sampled_ids_dataset(pairs, tokenizer, subword_dropouts, seed, cut_to)

    def tokenize(sources, targets):
        encoder_ids = tokenize_source(tokenizer, sources, max_length=cut_to)
        decoder_ids, labels = tokenize_target(tokenizer, targets, max_length=cut_to)
        return encoder_ids, decoder_ids, labels

    dataset = _as_pair_dataset(pairs)
    # Tokenizing a chunk at a time is much faster than one sentence per call.
    dataset = dataset.batch(_TOKENIZE_CHUNK).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
    # Unbatching ragged rows yields rank-1 "ragged" specs that `padded_batch`
    # rejects; passing them through a map turns them into plain tensors.
    return dataset.unbatch().map(lambda *ids: ids)


def _bucketed_batches(
    dataset, tokens_per_batch, max_length, multiple, pad_to_bucket_boundary, pad_id, lengths=None
):
    """Padded batches of similar-length examples, each within `tokens_per_batch` a side.

    With `lengths`, bucket `i` holds the sequences of `lengths[i - 1] + 1` to `lengths[i]`
    tokens, padded to `lengths[i]`; otherwise the buckets are `length_bucket_boundaries`'.
    """
    if lengths is None:
        boundaries = length_bucket_boundaries(max_length)
    else:
        boundaries = [length + 1 for length in lengths]
    # A bucket's sequences are at most `boundary - 1` long, so this many fit the budget.
    batch_sizes = [
        _rows_for_length(tokens_per_batch, boundary - 1, multiple) for boundary in boundaries
    ]
    batch_sizes.append(batch_sizes[-1])  # Never used: lengths stop at max_length.
    return dataset.bucket_by_sequence_length(
        element_length_func=lambda encoder_ids, decoder_ids, labels: tf.maximum(
            tf.size(encoder_ids), tf.size(decoder_ids)
        ),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=batch_sizes,
        padded_shapes=([None], [None], [None]),
        padding_values=(pad_id, pad_id, pad_id),
        pad_to_bucket_boundary=pad_to_bucket_boundary,
    )


def _rows_filled_to_budget(dataset, tokens_per_batch, multiple, pad_id):
    """`dataset` with every batch completed by rows of `pad_id` to its length's full size.

    A bucket's leftover batch would otherwise bring a shape of its own; rows of padding
    carry no label, so the loss and `MaskedAccuracy` give them a weight of 0.
    """

    def fill(*ids):
        length = tf.shape(ids[0])[1]
        rows = tf.maximum(multiple, tokens_per_batch // length // multiple * multiple)
        missing = rows - tf.shape(ids[0])[0]
        return tuple(tf.pad(part, [[0, missing], [0, 0]], constant_values=pad_id) for part in ids)

    return dataset.map(fill)


def _rows_padded_to_multiple(dataset, multiple, pad_id):
    """`dataset` with rows of `pad_id` added until every batch size is a multiple of `multiple`."""

    # The flushed partial batches: whole rows of padding carry no label and no loss.
    def pad_rows(*ids):
        missing = tf.math.floormod(-tf.shape(ids[0])[0], multiple)
        return tuple(tf.pad(part, [[0, missing], [0, 0]], constant_values=pad_id) for part in ids)

    return dataset.map(pad_rows)


def make_translation_dataset(
    pairs,
    tokenizer,
    tokens_per_batch=4096,
    max_length=256,
    truncate=False,
    shuffle=False,
    shuffle_buffer_size=32768,
    seed=None,
    pad_to_bucket_boundary=False,
    cache=True,
    min_tokens_per_batch=0,
    subword_dropout=0.0,
    batch_size_multiple=1,
    fixed_shapes=False,
    fixed_lengths=None,
):
    """Batches of (source, target) sentence pairs for teacher-forced training.

    Each pair is tokenized with [`tokenize_source`][keras_transformer.text.tokenize_source]
    and [`tokenize_target`][keras_transformer.text.tokenize_target], grouped with pairs of
    similar length, and batched so that a batch holds at most `tokens_per_batch` tokens
    on each side, padding included. The translation guide says
    [how the batches are made][how-the-batches-are-made] and which arguments suit
    training.

    Args:
        pairs: list of `(source, target)` str pairs (e.g. from `load_multi30k`), or a
            `tf.data.Dataset` of `(source, target)` scalar `tf.string` pairs.
        tokenizer: a [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer].
        tokens_per_batch: int, token budget per side: `batch * length` of the padded
            encoder input and of the padded decoder input each stay within it.
            Defaults to `4096`.
        max_length: int, longest encoder input (source + end id) and decoder input
            (start id + target) kept. Must be <= `tokens_per_batch`. Defaults to `256`.
        truncate: bool, cut over-long sentences to `max_length` (the end id stays
            last) instead of dropping the pair. Defaults to `False` (drop).
        shuffle: bool, shuffle the pairs before bucketing and the batches after it,
            differently each epoch; use for training. Defaults to `False`.
        shuffle_buffer_size: int, shuffle buffer in pairs. Defaults to `32768`.
        seed: int, the seed of the shuffles and of `subword_dropout`. Defaults to
            `None` (random).
        pad_to_bucket_boundary: bool, pad every batch to its bucket's largest length
            (encoder and decoder alike) instead of its longest sequence, so that fewer
            shapes occur. Defaults to `False`.
        cache: bool, keep the tokenized pairs in memory after the first pass.
            Defaults to `True`.
        min_tokens_per_batch: int, drop the batches whose padded encoder and decoder
            inputs both hold fewer tokens than this (the buckets' flushed leftovers);
            leave it at `0` for evaluation. Defaults to `0` (keep every batch).
        subword_dropout: float in `[0, 1)`, or a `(source, target)` pair of them: the
            BPE-dropout probability of
            [`tokenize_with_dropout`][keras_transformer.text.SubwordTokenizer.tokenize_with_dropout],
            which splits the sentences afresh on every pass. Needs `pairs` as a list;
            `cache` is ignored. Defaults to `0.0` (the fixed segmentation).
        batch_size_multiple: int, make every batch's size a multiple of this (the
            data-parallel replicas of a device mesh); smaller batches get rows of
            padding, which the loss and metrics ignore. Defaults to `1`.
        fixed_shapes: bool, pad the batches to the few shapes, one per length, that
            [`translation_batch_shapes`][keras_transformer.text.translation_batch_shapes]
            lists for the same arguments, so that XLA compiles a step once per shape
            (see [fixed batch shapes under XLA][fixed-batch-shapes-under-xla]).
            Defaults to `False`.
        fixed_lengths: list of int, the padded lengths with `fixed_shapes=True`,
            increasing, the last at least `max_length`. Defaults to `None`
            ([`fixed_shape_lengths(max_length)`][keras_transformer.text.fixed_shape_lengths]).

    Returns:
        A `tf.data.Dataset` of `({"encoder_token_ids": [B, S], "decoder_token_ids":
        [B, T]}, labels [B, T])`, all int32 and padded with the tokenizer's
        `pad_id`. `labels` are the decoder inputs shifted left by one:
        `decoder_token_ids[:, 1:] == labels[:, :-1]` wherever
        `decoder_token_ids[:, 1:]` is not padding, and each row of `labels` ends in
        `end_id`.

    Raises:
        ValueError: for a bad size or rate, `max_length` above
            `tokens_per_batch`, or `subword_dropout` with a `tf.data.Dataset`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer, make_translation_dataset
    >>> pairs = [("Two dogs play.", "Zwei Hunde spielen."),
    ...          ("A man in a blue shirt.", "Ein Mann in einem blauen Hemd.")]
    >>> tokenizer = SubwordTokenizer.train([s for pair in pairs for s in pair] * 10,
    ...                                    vocabulary_size=40, byte_fallback=False)
    >>> dataset = make_translation_dataset(pairs, tokenizer, tokens_per_batch=256,
    ...                                    max_length=64)
    >>> batches = list(dataset)
    >>> sum(int(labels.shape[0]) for _, labels in batches)  # both pairs, once
    2
    >>> inputs, labels = batches[0]
    >>> sorted(inputs)
    ['decoder_token_ids', 'encoder_token_ids']
    >>> decoder_ids = inputs["decoder_token_ids"]
    >>> bool(tf.reduce_all((decoder_ids[:, 1:] == labels[:, :-1]) | (decoder_ids[:, 1:] == 0)))
    True
    """
    _check_batch_sizes(tokens_per_batch, max_length, min_tokens_per_batch, batch_size_multiple)
    subword_dropout = _subword_dropouts(subword_dropout)
    if any(subword_dropout) and isinstance(pairs, tf.data.Dataset):
        raise ValueError(
            "`subword_dropout` needs `pairs` as a list of (source, target) str pairs, "
            "not a `tf.data.Dataset`: the sentences are split again in Python each pass."
        )
    pad_id = tokenizer.pad_id
    if not isinstance(fixed_shapes, bool):
        raise ValueError(f"`fixed_shapes` must be a bool. Received: fixed_shapes={fixed_shapes!r}")
    lengths = _checked_lengths(fixed_lengths, max_length) if fixed_shapes else None

    cut_to = max_length if truncate else None
    dataset = _tokenized_pairs(pairs, tokenizer, subword_dropout, seed, cut_to)
    if not truncate:
        dataset = dataset.filter(
            lambda encoder_ids, decoder_ids, labels: tf.logical_and(
                tf.size(encoder_ids) <= max_length, tf.size(decoder_ids) <= max_length
            )
        )
    if cache and not any(subword_dropout):
        dataset = dataset.cache()
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)

    dataset = _bucketed_batches(
        dataset,
        tokens_per_batch,
        max_length,
        batch_size_multiple,
        pad_to_bucket_boundary or fixed_shapes,
        pad_id,
        lengths,
    )
    if min_tokens_per_batch:
        dataset = dataset.filter(
            lambda encoder_ids, decoder_ids, labels: (
                tf.maximum(tf.size(encoder_ids), tf.size(decoder_ids)) >= min_tokens_per_batch
            )
        )
    if fixed_shapes:
        dataset = _rows_filled_to_budget(dataset, tokens_per_batch, batch_size_multiple, pad_id)
    elif batch_size_multiple > 1:
        dataset = _rows_padded_to_multiple(dataset, batch_size_multiple, pad_id)
    if shuffle:
        # Spreads each epoch's flushed partial batches among the full ones.
        dataset = dataset.shuffle(_BATCH_SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    return _as_model_inputs(dataset)


def _as_model_inputs(dataset):
    """`(encoder_ids, decoder_ids, labels)` batches as `({...}, labels)`, prefetched."""
    dataset = dataset.map(
        lambda encoder_ids, decoder_ids, labels: (
            {"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids},
            labels,
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    # Autotuning runs a thread that sleeps for periods growing to a minute, and deleting
    # an iterator waits for it to wake: Keras deletes the validation iterator every epoch
    # (and the training one, on a finite dataset), so epochs stalled for up to 60 s with
    # the CPU idle. After the cache the pipeline costs milliseconds a batch, so the
    # untuned defaults (parallel calls, a growing prefetch buffer) are enough.
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)
