"""tf.data pipeline for text classification: texts and labels → length-bucketed batches.

The layout of a row is `[start_id] + pieces + [end_id]`: the start id is the
sequence's first token, so it can play BERT's `[CLS]` role for
`TransformerClassifier(pooling="cls")`, and `tokenize_for_classification` is the one
function that lays texts out this way, for training, evaluation and serving alike.
"""

import math

import numpy as np
import tensorflow as tf

from keras_transformer.text.translation_dataset import (
    fixed_shape_lengths,
    length_bucket_boundaries,
)
from keras_transformer.validation import is_int, is_real

_TOKENIZE_CHUNK = 1024
_SPECIAL_IDS_PER_ROW = 2  # start id and end id
# Texts to classify are often short (SST-2's phrases: a median of 11 pieces), so the fixed
# lengths start lower than translation's 16: padding them to 16 cost 1.44x the tokens, to
# the list from 8 1.21x.
_FIXED_MIN_LENGTH = 8


def _check_max_length(max_length, allow_none):
    if max_length is None and allow_none:
        return None
    if not is_int(max_length) or max_length < 3:
        allowed = "None or an int >= 3" if allow_none else "an int >= 3"
        raise ValueError(
            f"`max_length` must be {allowed}: it counts every id of a row, the start and end "
            f"ids included, so 3 leaves room for one piece. Received: max_length={max_length!r}"
        )
    return int(max_length)


def _check_head_fraction(head_fraction):
    if not is_real(head_fraction) or not 0 <= head_fraction <= 1:
        raise ValueError(
            "`head_fraction` must be a float in [0, 1], the share of a truncated text's pieces "
            "taken from its beginning (e.g. 0.25; 1 keeps only the beginning, 0 only the end). "
            f"Received: head_fraction={head_fraction!r}"
        )
    return float(head_fraction)


def head_and_tail_sizes(max_length, head_fraction=0.25):
    """How many pieces a truncated text keeps from its beginning and from its end.

    Args:
        max_length: int >= 3, the longest row, start and end ids included.
        head_fraction: float in `[0, 1]`. Defaults to `0.25`.

    Returns:
        `(head, tail)`: `head = round((max_length - 2) * head_fraction)` (Python's
        `round`, so halves go to the even neighbour) and `tail = max_length - 2 - head`.

    Example:

    >>> head_and_tail_sizes(256)
    (64, 190)
    """
    max_length = _check_max_length(max_length, allow_none=False)
    head_fraction = _check_head_fraction(head_fraction)
    budget = max_length - _SPECIAL_IDS_PER_ROW
    head = round(budget * head_fraction)
    return head, budget - head


def _head_and_tail(ids, head, tail):
    """Keeps the first `head` and last `tail` ids of rows longer than `head + tail`."""
    lengths = ids.row_lengths()
    row_ids = ids.value_rowids()
    positions = tf.range(tf.size(ids.flat_values, out_type=tf.int64)) - tf.gather(
        ids.row_starts(), row_ids
    )
    # For a row of at most `head + tail` ids, `length - tail <= head`, so every position
    # passes one test or the other and the row is kept whole without a separate branch.
    keep = tf.logical_or(positions < head, positions >= tf.gather(lengths, row_ids) - tail)
    return tf.ragged.boolean_mask(ids, ids.with_flat_values(keep))


def tokenize_for_classification(tokenizer, texts, max_length=None, head_fraction=0.25):
    """Classifier input ids: `[start_id] + pieces + [end_id]` per text, head + tail truncated.

    The start id is each row's first token, so
    [`TransformerClassifier(pooling="cls")`][keras_transformer.models.TransformerClassifier]
    classifies from its state as BERT does from `[CLS]`. A text too long for
    `max_length` keeps its first `head` pieces and its last `tail` pieces (see
    `head_and_tail_sizes`): Sun et al. (2019) found this "head + tail" cut better than
    keeping the beginning or the end alone on long reviews, whose opening and verdict
    carry most of the sentiment.

    The ops are TensorFlow graph ops, so this runs eagerly, inside
    `tf.data.Dataset.map` and inside a `tf.function` or an exported SavedModel. Use it
    for training and at serving time alike so the model always sees the same layout.

    Args:
        tokenizer: a [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer]
            (anything with
            [`tokenize`][keras_transformer.text.SubwordTokenizer.tokenize], `start_id`
            and `end_id`).
        texts: a 1-D `tf.string` tensor, or a list (or 1-D NumPy array) of str, of
            shape `(batch,)`.
        max_length: int >= 3, the longest row, start and end ids included. Defaults
            to `None` (no truncation).
        head_fraction: float in `[0, 1]`, the share of a truncated row's
            `max_length - 2` pieces taken from the beginning of the text; the rest
            comes from its end. Ignored when `max_length` is `None`. Defaults to `0.25`.

    Returns:
        An int32 `tf.RaggedTensor` of shape `(batch, None)`; pad it with
        `.to_tensor()` (pad id 0) to feed a model.

    Raises:
        ValueError: for `texts` that are not 1-D, a `max_length` below 3 or a
            `head_fraction` outside `[0, 1]`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(
    ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
    ...     vocabulary_size=30, byte_fallback=False)
    >>> from keras_transformer.text import tokenize_for_classification
    >>> texts = ["Two dogs play.", "Zwei Hunde spielen. Two dogs play. Zwei Hunde."]
    >>> ids = tokenize_for_classification(tokenizer, texts, max_length=8)
    >>> [(row[0], row[-1]) for row in ids.to_list()] == [(2, 3), (2, 3)]  # start, end
    True
    >>> int(ids.row_lengths()[1])  # cut: 2 pieces from the head, 4 from the tail
    8

    References:
        - [Sun et al., 2019](https://arxiv.org/abs/1905.05583), "How to Fine-Tune
          BERT for Text Classification?", section 5.3.
    """
    max_length = _check_max_length(max_length, allow_none=True)
    head_fraction = _check_head_fraction(head_fraction)
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    if texts.shape.rank != 1:
        raise ValueError(
            "`texts` must be a 1-D batch of strings, shape `(batch,)`. Received shape "
            f"{texts.shape}. Wrap a single text in a list, or batch a dataset of texts "
            "before mapping this function over it."
        )
    ids = tokenizer.tokenize(texts)
    if max_length is not None:
        ids = _head_and_tail(ids, *head_and_tail_sizes(max_length, head_fraction))
    start = tf.fill([ids.nrows(), 1], tf.constant(tokenizer.start_id, tf.int32))
    end = tf.fill([ids.nrows(), 1], tf.constant(tokenizer.end_id, tf.int32))
    return tf.concat([start, ids, end], axis=1)


def _as_list(values, name):
    if isinstance(values, (str, bytes)):
        raise ValueError(f"`{name}` must be a list of items, not a single string.")
    if not isinstance(values, (list, tuple)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(
                f"`{name}` must be 1-D (one item per example). Received shape {array.shape}."
            )
        return array.tolist()
    return list(values)


def _check_texts(texts):
    texts = _as_list(texts, "texts")
    if not texts:
        raise ValueError("`texts` is empty; pass at least one text (and its label).")
    for index, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise ValueError(
                f"`texts` must hold str (or UTF-8 bytes) items. Received texts[{index}] of type "
                f"{type(text).__name__}: {text!r}"
            )
    return texts


def _check_labels(labels, num_texts, num_classes):
    labels = _as_list(labels, "labels")
    if len(labels) != num_texts:
        raise ValueError(
            f"`labels` must hold one label per text: got {len(labels)} labels for "
            f"{num_texts} texts."
        )
    for index, label in enumerate(labels):
        if not is_int(label):
            raise ValueError(
                f"`labels` must be integer class ids. Received labels[{index}]={label!r} "
                f"({type(label).__name__}). Map class names to ids first, e.g. "
                "`[names.index(label) for label in labels]`."
            )
        if label < 0 or (num_classes is not None and label >= num_classes):
            valid = "a non-negative class id" if num_classes is None else "in [0, num_classes)"
            raise ValueError(
                f"Every label must be {valid}. Received labels[{index}]={label} with "
                f"num_classes={num_classes}. Fix the label or raise `num_classes`."
            )
    return np.asarray(labels, np.int32)


def _check_positive_int(name, value):
    if not is_int(value) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return int(value)


@tf.autograph.experimental.do_not_convert
def _complete_batch(ids, labels, multiple, rows=None):
    """`(ids, labels, weights)`, completed with rows of weight 0 to `rows` (or a `multiple`).

    The extra rows repeat the batch's own rows rather than holding padding only: they are
    ordinary inputs for any model, where a row without a token is a corner case that a
    pooling layer may answer with NaN, which a weight of 0 does not cancel (`0 * nan`).
    """
    real = tf.shape(labels)[0]
    missing = tf.math.floormod(-real, multiple) if rows is None else rows - real
    copies = tf.math.floormod(tf.range(missing), real)
    weights = tf.concat([tf.ones([real], tf.float32), tf.zeros([missing], tf.float32)], 0)
    return (
        tf.concat([ids, tf.gather(ids, copies)], 0),
        tf.concat([labels, tf.gather(labels, copies)], 0),
        weights,
    )


def classification_batch_shapes(batch_size=32, max_length=256):
    """Every `(rows, length)` of `make_classification_dataset(..., fixed_shapes=True)`.

    Every batch holds `batch_size` rows (a short one is completed with copies of sample
    weight 0) padded to one of
    [`fixed_shape_lengths(max_length, min_length=8)`][keras_transformer.text.fixed_shape_lengths]:
    the powers of two and their halfway points from 8, then `max_length`. The masked-LM
    pipeline's token ids take the same shapes.

    Args:
        batch_size: int, rows per batch. Defaults to `32`.
        max_length: int >= 3, the longest row. Defaults to `256`.

    Returns:
        A list of `(batch_size, length)` pairs, shortest first.

    Example:

    >>> from keras_transformer.text import classification_batch_shapes
    >>> [length for _, length in classification_batch_shapes(64, max_length=64)]
    [8, 12, 16, 24, 32, 48, 64]
    """
    batch_size = _check_positive_int("batch_size", batch_size)
    max_length = _check_max_length(max_length, allow_none=False)
    lengths = fixed_shape_lengths(max_length, min_length=_FIXED_MIN_LENGTH)
    return [(batch_size, length) for length in lengths]


def _tokenized_examples(texts, labels, tokenizer, max_length, head_fraction):
    """A cached dataset of `(ids, label)` per text, ids from `tokenize_for_classification`."""

    # Plain TensorFlow ops with no Python control flow on tensors: AutoGraph has nothing
    # to convert, and skipping it saves re-parsing the source of every function called.
    @tf.autograph.experimental.do_not_convert
    def tokenize(chunk_texts, chunk_labels):
        ids = tokenize_for_classification(tokenizer, chunk_texts, max_length, head_fraction)
        return ids, chunk_labels

    dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
    # Tokenizing a chunk at a time is much faster than one text per call.
    dataset = dataset.batch(_TOKENIZE_CHUNK).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
    # Unbatched ragged rows keep a ragged spec that `padded_batch` rejects; an identity
    # map turns them into plain 1-D tensors.
    return dataset.unbatch().map(lambda ids, label: (ids, label)).cache()


def _bucketed_batches(
    dataset, batch_size, max_length, pad_id, num_examples, shuffle, seed, fixed_shapes=False
):
    """Padded batches of `batch_size` similar-length examples, in shuffled order if `shuffle`.

    With `fixed_shapes`, the buckets end at the lengths of `classification_batch_shapes`
    and every batch is padded to its bucket's end.
    """
    if fixed_shapes:
        lengths = fixed_shape_lengths(max_length, min_length=_FIXED_MIN_LENGTH)
        boundaries = [length + 1 for length in lengths]
    else:
        boundaries = length_bucket_boundaries(max_length)
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=lambda ids, label: tf.size(ids),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        padded_shapes=([None], []),
        padding_values=(pad_id, 0),
        pad_to_bucket_boundary=fixed_shapes,
    )
    if shuffle:
        # A buffer as large as an epoch's batches: every bucket's leftover batch is
        # flushed when the examples run out, and they should not all come last.
        batch_buffer = math.ceil(num_examples / batch_size) + len(boundaries) + 1
        batch_seed = None if seed is None else seed + 1
        dataset = dataset.shuffle(batch_buffer, seed=batch_seed, reshuffle_each_iteration=True)
    return dataset


def make_classification_dataset(
    texts,
    labels,
    tokenizer,
    batch_size=32,
    max_length=256,
    num_classes=None,
    shuffle=True,
    seed=None,
    head_fraction=0.25,
    bucket=True,
    batch_size_multiple=1,
    fixed_shapes=False,
):
    """Batches of (token ids, label) for training or evaluating a `TransformerClassifier`.

    Texts are tokenized once, with
    [`tokenize_for_classification`][keras_transformer.text.tokenize_for_classification],
    and the ids are cached in memory during the first pass, so later epochs cost no
    tokenization (over IMDB's 25,000 training reviews, a later pass is more than ten
    times faster than the first). Then every epoch, with `shuffle=True`,
    shuffles the examples (differently each epoch, over all of them), groups them into
    buckets of similar length
    ([`length_bucket_boundaries(max_length)`][keras_transformer.text.length_bucket_boundaries]) so a
    batch carries little padding (1.7% of IMDB's padded ids at `max_length=256`,
    against 17% without buckets), makes batches of `batch_size` examples (the last
    batch of a bucket may be smaller) and shuffles the order of the batches, so the
    buckets' small leftover batches do not all come at the end of the epoch. With
    `shuffle=False` the batches come in the same order every time, for evaluation. The
    dataset has `tf.data` autotuning turned off, like
    [`make_translation_dataset`][keras_transformer.text.make_translation_dataset]
    (with it, Keras stalled at epoch ends deleting iterators).

    Args:
        texts: list or 1-D NumPy array of str, one text per example.
        labels: list or 1-D NumPy array of int class ids, one per text.
        tokenizer: a
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer] whose
            `pad_id` is 0.
        batch_size: int, examples per batch. Defaults to `32`.
        max_length: int >= 3, the longest row, start and end ids included; longer
            texts are cut, head + tail (see `tokenize_for_classification`).
            Defaults to `256`.
        num_classes: int, when given every label must be in `[0, num_classes)`.
            Defaults to `None` (labels need only be non-negative).
        shuffle: bool, shuffle examples and batches, differently each epoch; use for
            training. Defaults to `True`.
        seed: int, shuffle seed: the same seed gives the same sequence of epochs.
            Defaults to `None` (random).
        head_fraction: float in `[0, 1]`, the share of a truncated text's pieces
            taken from its beginning. Defaults to `0.25`.
        bucket: bool, batch texts of similar length together. `False` batches them
            in (shuffled) order, padding each batch to its longest row.
            Defaults to `True`.
        batch_size_multiple: int, make every batch's size a multiple of this: the
            data-parallel replicas of a device mesh, which split each batch evenly.
            `batch_size` must be a multiple of it; a smaller batch (a bucket's
            leftover, the last one) is completed with copies of its own rows
            whose sample weight is 0, so a loss with
            `reduction="mean_with_sample_weight"` and the metrics compiled as
            `weighted_metrics` count only the real rows (Keras gives sample
            weights to those, not to `metrics`). With a value above 1 the dataset yields
            `(token_ids, labels, sample_weights)`. Defaults to `1`.
        fixed_shapes: bool, for training and evaluating under XLA (JAX, or
            TensorFlow with `jit_compile=True`), which compiles the step once per
            input shape: every batch is padded to the first length of
            [`fixed_shape_lengths`][keras_transformer.text.fixed_shape_lengths]
            (`fixed_shape_lengths(max_length, min_length=8)`) that holds its longest
            row (the length buckets end there; without `bucket`, to `max_length`)
            and completed to `batch_size` rows with copies of sample weight 0, as
            for `batch_size_multiple`. The batches then take only the shapes of
            [`classification_batch_shapes`][keras_transformer.text.classification_batch_shapes]
            (`classification_batch_shapes(batch_size, max_length)`: 7 for
            `max_length=64`, 11 for 256), and the dataset yields
            `(token_ids, labels, sample_weights)`. Without XLA, TensorFlow runs
            the unpadded batches faster: leave it `False` there. Defaults to
            `False`.

    Returns:
        A `tf.data.Dataset` of `(token_ids, labels)`: int32 `(batch, length)` ids
        padded at the end of each row with 0, and int32 `(batch,)` labels; with
        `batch_size_multiple` above 1 or `fixed_shapes`, `(token_ids, labels,
        sample_weights)`, float32 `(batch,)` weights of 1 for the real rows and 0
        for the copies.

    Raises:
        ValueError: for empty or non-string `texts`, labels that are not
            integer class ids (one per text, in `[0, num_classes)`), a bad
            size, a `batch_size` that is not a multiple of
            `batch_size_multiple`, or a tokenizer whose `pad_id` is not 0.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer, make_classification_dataset
    >>> texts = ["A fine film.", "Two dull hours.", "A fine cast.", "Dull."]
    >>> tokenizer = SubwordTokenizer.train(texts * 10, vocabulary_size=30,
    ...                                    byte_fallback=False)
    >>> dataset = make_classification_dataset(texts, [1, 0, 1, 0], tokenizer,
    ...                                       batch_size=2, num_classes=2, shuffle=False)
    >>> batches = list(dataset)
    >>> sorted(label for _, labels in batches for label in labels.numpy().tolist())
    [0, 0, 1, 1]
    >>> token_ids, labels = batches[0]
    >>> token_ids.dtype.name, int(token_ids[0, 0]) == tokenizer.start_id
    ('int32', True)

    `model.fit(dataset)` then trains a `TransformerClassifier` on it (with
    `shuffle=True` and a `seed` for training).
    """
    texts = _check_texts(texts)
    if num_classes is not None:
        num_classes = _check_positive_int("num_classes", num_classes)
    labels = _check_labels(labels, len(texts), num_classes)
    batch_size = _check_positive_int("batch_size", batch_size)
    multiple = _check_positive_int("batch_size_multiple", batch_size_multiple)
    if batch_size % multiple:
        raise ValueError(
            f"`batch_size` ({batch_size}) must be a multiple of `batch_size_multiple` "
            f"({multiple}), the replicas that split each batch evenly. Pass e.g. "
            f"batch_size={max(multiple, batch_size // multiple * multiple)}."
        )
    max_length = _check_max_length(max_length, allow_none=False)
    head_fraction = _check_head_fraction(head_fraction)
    if not isinstance(fixed_shapes, bool):
        raise ValueError(f"`fixed_shapes` must be a bool. Received: fixed_shapes={fixed_shapes!r}")
    if seed is not None and not is_int(seed):
        raise ValueError(f"`seed` must be None or an int. Received: seed={seed!r}")
    if tokenizer.pad_id != 0:
        raise ValueError(
            f"The tokenizer's `pad_id` must be 0: batches are padded with zeros. "
            f"Received: pad_id={tokenizer.pad_id}"
        )

    dataset = _tokenized_examples(texts, labels, tokenizer, max_length, head_fraction)
    if shuffle:
        dataset = dataset.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    if bucket:
        dataset = _bucketed_batches(
            dataset,
            batch_size,
            max_length,
            tokenizer.pad_id,
            len(texts),
            shuffle,
            seed,
            fixed_shapes,
        )
    else:
        dataset = dataset.padded_batch(
            batch_size,
            padded_shapes=([max_length if fixed_shapes else None], []),
            padding_values=(tokenizer.pad_id, 0),
        )
    if fixed_shapes:
        dataset = dataset.map(
            lambda ids, batch_labels: _complete_batch(ids, batch_labels, multiple, batch_size)
        )
    elif multiple > 1:
        dataset = dataset.map(
            lambda ids, batch_labels: _complete_batch(ids, batch_labels, multiple)
        )
    # See `make_translation_dataset`: with autotuning, deleting an iterator (Keras does
    # so every epoch) waits for its sleeping thread, up to a minute.
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)
