"""tf.data pipeline for masked-language-model pretraining: raw texts → masked batches."""

import numpy as np
import tensorflow as tf

from keras_transformer.text.classification_dataset import make_classification_dataset
from keras_transformer.text.masking import mask_tokens
from keras_transformer.validation import is_int


def _prediction_slots(maskable, mask_rate, max_predictions):
    """The most positions `mask_tokens` chooses in a row of at most `maskable` maskable ids."""
    # The same float32 rounding as `mask_tokens`, which is monotonic in the row's tokens.
    most = tf.cast(tf.round(mask_rate * tf.cast(maskable, tf.float32)), tf.int32)
    most = tf.maximum(most, 1)
    return most if max_predictions is None else tf.minimum(most, max_predictions)


_TOKENIZE_CHUNK = 4096


def pack_texts(texts, tokenizer, max_length, seed=None):
    """Every text as `[start] pieces [end]`, concatenated and cut into rows of `max_length`.

    No text is cut short and no row is mostly padding: a long review runs on over
    several rows, a short phrase shares its row with others (RoBERTa's
    "full-sentences" input). The texts are shuffled once first (with `seed`),
    so each row mixes the corpora. The last row is padded with `pad_id`.

    Args:
        texts: list or 1-D NumPy array of str.
        tokenizer: a
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer].
        max_length: int >= 3, the length of every row.
        seed: int, seed of the order of the texts. Defaults to `None` (random).

    Returns:
        An int32 NumPy array `(rows, max_length)`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer, pack_texts
    >>> texts = ["A fine film.", "Two dull hours.", "A fine cast.", "Dull."]
    >>> tokenizer = SubwordTokenizer.train(texts * 10, vocabulary_size=30,
    ...                                    byte_fallback=False, mask_token=True)
    >>> rows = pack_texts(texts, tokenizer, max_length=8, seed=0)
    >>> rows.shape[1], int((rows == tokenizer.start_id).sum())
    (8, 4)
    """
    texts = np.asarray(list(texts) if not isinstance(texts, np.ndarray) else texts, dtype=object)
    if not is_int(max_length) or max_length < 3:
        raise ValueError(f"`max_length` must be an int >= 3. Received: max_length={max_length!r}")
    order = np.random.default_rng(seed).permutation(len(texts))
    pieces = []
    for begin in range(0, len(texts), _TOKENIZE_CHUNK):
        chunk = [str(text) for text in texts[order[begin : begin + _TOKENIZE_CHUNK]]]
        ids = tokenizer.tokenize(chunk)
        rows = ids.nrows()
        start = tf.fill([rows, 1], tf.constant(tokenizer.start_id, tf.int32))
        end = tf.fill([rows, 1], tf.constant(tokenizer.end_id, tf.int32))
        pieces.append(tf.concat([start, ids, end], axis=1).flat_values.numpy())
    stream = np.concatenate(pieces) if pieces else np.zeros([0], np.int32)
    num_rows = -(-len(stream) // max_length)
    padded = np.full(num_rows * max_length, tokenizer.pad_id, np.int32)
    padded[: len(stream)] = stream
    return padded.reshape(num_rows, max_length)


def make_masked_lm_dataset(
    texts,
    tokenizer,
    batch_size=32,
    max_length=256,
    mask_rate=0.15,
    max_predictions=None,
    shuffle=True,
    seed=None,
    head_fraction=0.25,
    fixed_shapes=False,
    pack=False,
):
    """Batches for pretraining a `MaskedLM`, masked afresh every epoch.

    The texts are laid out and batched as for classification
    ([`make_classification_dataset`][keras_transformer.text.make_classification_dataset]:
    `[start] pieces [end]`, long texts cut head + tail, length buckets), or,
    with `pack=True`, concatenated into full rows of `max_length`
    ([`pack_texts`][keras_transformer.text.pack_texts]); then
    [`mask_tokens`][keras_transformer.text.mask_tokens] hides ~15% of each
    batch's tokens with BERT's 80/10/10 rule. Every epoch masks other tokens
    ("dynamic masking", Liu et al., 2019); with a `seed`, the sequence of epochs
    repeats exactly.

    Packing matters when many texts are short: in batches of similar-length
    texts, a batch of 32 five-piece phrases holds 160 tokens and 32 masked
    ones, against 8,192 and about 1,200 in a packed batch of 256-piece rows,
    for a training step of similar cost on a CPU.

    Args:
        texts: list or 1-D NumPy array of str, e.g. every training review and
            sentence (never test text).
        tokenizer: a
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer]
            trained with `mask_token=True`.
        batch_size: int, texts per batch. Defaults to `32`.
        max_length: int, the longest row, start and end ids included.
            Defaults to `256`.
        mask_rate: float, share of each row's tokens to predict. Defaults to
            `0.15`.
        max_predictions: int, most predictions per row, or `None` (no limit).
            Defaults to `None`.
        shuffle: bool, shuffle texts and batches each epoch. Defaults to `True`.
        seed: int, seed of the shuffling and the masks. Defaults to `None`
            (random).
        head_fraction: float, share of a cut text taken from its beginning.
            Defaults to `0.25`.
        fixed_shapes: bool, for training under XLA (JAX, or TensorFlow with
            `jit_compile=True`), which compiles the step once per input shape:
            the token ids take the shapes of `make_classification_dataset(...,
            fixed_shapes=True)`, `classification_batch_shapes(batch_size,
            max_length)`, and the prediction slots are as
            many as a full row of that length can need, `max(1,
            round(mask_rate * (length - 2)))` (at most `max_predictions`), so
            `mask_positions` and `labels` take one shape per length too. The
            rows that complete a batch and the unused slots have the label
            `pad_id`, which the loss and
            [`MaskedAccuracy`][keras_transformer.training.MaskedAccuracy]
            ignore. Defaults to `False`.
        pack: bool, concatenate the texts into full rows of `max_length`
            (`pack_texts`; no text is cut) instead of one text per row.
            The rows are shuffled each epoch; every batch holds `batch_size`
            rows (the last, short one is dropped). Defaults to `False`.

    Returns:
        A `tf.data.Dataset` of `({"token_ids", "mask_positions"}, labels)`
        for `MaskedLM.fit` (see `mask_tokens`).

    Raises:
        ValueError: for a tokenizer without a mask id, and as
            `make_classification_dataset` and `mask_tokens`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer, make_masked_lm_dataset
    >>> texts = ["A fine film.", "Two dull hours.", "A fine cast.", "Dull."]
    >>> tokenizer = SubwordTokenizer.train(texts * 10, vocabulary_size=30,
    ...                                    byte_fallback=False, mask_token=True)
    >>> dataset = make_masked_lm_dataset(texts, tokenizer, batch_size=4, seed=0)
    >>> inputs, labels = next(iter(dataset))
    >>> sorted(inputs)
    ['mask_positions', 'token_ids']
    >>> inputs["mask_positions"].shape == labels.shape
    True

    `masked_lm.fit(dataset)` then pretrains a `MaskedLM`, whose loss ignores
    the label `pad_id` of unused slots.
    """
    if tokenizer.mask_id is None:
        raise ValueError(
            "The tokenizer has no mask id: train it with "
            "`SubwordTokenizer.train(texts, ..., mask_token=True)`."
        )
    texts = list(texts) if not isinstance(texts, np.ndarray) else texts
    if not isinstance(pack, bool):
        raise ValueError(f"`pack` must be a bool. Received: pack={pack!r}")
    if pack:
        batches = _packed_batches(texts, tokenizer, batch_size, max_length, shuffle, seed)
    else:
        batches = make_classification_dataset(
            texts,
            np.zeros(len(texts), "int32"),
            tokenizer,
            batch_size=batch_size,
            max_length=max_length,
            shuffle=shuffle,
            seed=seed,
            head_fraction=head_fraction,
            fixed_shapes=fixed_shapes,
        )
    # One stateless seed per batch; the stream of seeds changes every epoch, repeatably.
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    special_ids = (tokenizer.pad_id, tokenizer.start_id, tokenizer.end_id)

    @tf.autograph.experimental.do_not_convert
    def mask(batch, batch_seed):
        token_ids = batch[0]
        inputs, labels = mask_tokens(
            token_ids,
            tokenizer.mask_id,
            tokenizer.vocabulary_size,
            mask_rate=mask_rate,
            special_ids=special_ids,
            max_predictions=max_predictions,
            pad_id=tokenizer.pad_id,
            seed=batch_seed,
        )
        if not fixed_shapes:
            return inputs, labels
        if not pack:
            # The copies that complete the batch (weight 0) predict nothing.
            weights = batch[2]
            labels = tf.where(weights[:, None] > 0, labels, tokenizer.pad_id)
        # A row of one text keeps its start and end; a packed row may hold no special id.
        length = tf.shape(token_ids)[1]
        slots = _prediction_slots(length if pack else length - 2, mask_rate, max_predictions)
        missing = [[0, 0], [0, slots - tf.shape(labels)[1]]]
        positions = tf.pad(inputs["mask_positions"], missing)
        labels = tf.pad(labels, missing, constant_values=tokenizer.pad_id)
        return {"token_ids": inputs["token_ids"], "mask_positions": positions}, labels

    return tf.data.Dataset.zip(batches, seeds).map(mask)


def _packed_batches(texts, tokenizer, batch_size, max_length, shuffle, seed):
    """Batches `(token_ids,)` of `batch_size` packed rows (`pack_texts`), reshuffled each epoch."""
    if not is_int(batch_size) or batch_size < 1:
        raise ValueError(
            f"`batch_size` must be a positive int. Received: batch_size={batch_size!r}"
        )
    rows = pack_texts(texts, tokenizer, max_length, seed=seed)
    if len(rows) < batch_size:
        raise ValueError(
            f"The texts fill {len(rows)} rows of {max_length} pieces, fewer than one batch of "
            f"{batch_size}: pass a smaller `batch_size` or `max_length`."
        )
    dataset = tf.data.Dataset.from_tensor_slices(rows)
    if shuffle:
        dataset = dataset.shuffle(len(rows), seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size, drop_remainder=True).map(lambda ids: (ids,))
