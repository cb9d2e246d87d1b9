"""The `SubwordTokenizer` interface around a tokenizer written in plain Python.

WordPiece and byte-level BPE run in Python for exact parity with transformers; this base
holds what they share (special tokens kept whole, a cache of each word's ids, the writing
of their folders) and turns their Python ids into the `tf.Tensor` / `tf.RaggedTensor`
layout of `SubwordTokenizer`, eagerly or through `tf.py_function` inside `tf.data`.
"""

import os

import numpy as np
import tensorflow as tf

from keras_transformer.text.tokenizer_files import (
    added_token_pattern,
    check_additional_special_tokens,
    split_added_tokens,
    write_tokenizer_config,
)

_WORD_CACHE_SIZE = 100_000  # words whose ids are remembered


def python_strings(texts):
    """A `tf.string` tensor of rank 0 or 1 as a Python `str` or list of `str`."""
    values = texts.numpy()
    if isinstance(values, bytes):
        return values.decode("utf-8")
    return [value.decode("utf-8") for value in values]


def _python_texts(inputs):
    """`(list of str, single)` for a str, a list of str or a rank 0/1 `tf.string` tensor."""
    if isinstance(inputs, (str, bytes)):
        return [inputs.decode("utf-8") if isinstance(inputs, bytes) else inputs], True
    if isinstance(inputs, (list, tuple)) and all(isinstance(x, (str, bytes)) for x in inputs):
        return [x.decode("utf-8") if isinstance(x, bytes) else x for x in inputs], False
    texts = _texts_tensor(inputs)
    values = texts.numpy()
    if texts.shape.rank == 0:
        return [values.decode("utf-8")], True
    return [value.decode("utf-8") for value in values], False


def _texts_tensor(inputs):
    if isinstance(inputs, tf.RaggedTensor):
        raise ValueError("`inputs` must be a str, a list of str or a rank 0/1 string tensor.")
    texts = tf.convert_to_tensor(inputs, dtype=tf.string)
    if texts.shape.rank not in (0, 1):
        raise ValueError(
            "`inputs` must be a str, a list of str or a `tf.string` tensor of rank 0 or 1. "
            f"Received: shape={texts.shape}"
        )
    return texts


def _ragged_ids(rows):
    values = tf.constant([index for row in rows for index in row], dtype=tf.int32)
    lengths = tf.constant([len(row) for row in rows], dtype=tf.int64)
    return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)


def ids_rank_2(ids):
    """`(int32 tf.RaggedTensor of shape (batch, None), single)` for ids of rank 1 or 2."""
    if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
        if isinstance(ids, (list, tuple)):
            ids = tf.ragged.constant(ids, dtype=tf.int64) if len(ids) else tf.zeros([0], tf.int32)
        else:
            ids = tf.convert_to_tensor(ids)
    ids = tf.cast(ids, tf.int32)
    if ids.shape.rank not in (1, 2):
        raise ValueError(
            f"`ids` must have rank 1 (one sentence) or 2 (a batch). Received: ids.shape={ids.shape}"
        )
    single = ids.shape.rank == 1
    if single:
        ids = tf.expand_dims(ids, 0)
    if not isinstance(ids, tf.RaggedTensor):
        ids = tf.RaggedTensor.from_tensor(ids)
    return ids, single


class HuggingFacePythonTokenizer:
    """The `SubwordTokenizer` interface around a tokenizer written in plain Python.

    Subclasses call `__init__` with their checked vocabulary and named special tokens, set
    `_pad_id`, `_unk_id`, `_start_id` and `_end_id`, and define `_words(segment)` (the
    words of text between special tokens, as `_split_word` takes them),
    `_split_word(word)` (its ids), `_decode_ids(ids)`, `_with_special_ids(ids)`,
    `_write_vocabulary(directory)` (the vocabulary files), `_tokenizer_config()` (the
    options of `tokenizer_config.json`) and `from_huggingface(directory)`.

    Args:
        vocabulary: dict of token to id, checked.
        vocabulary_size: int, the largest id + 1.
        tokens: dict of special token name (`"unk_token"`, ...) to token, or to `None`
            for one the tokenizer lacks.
        additional_special_tokens: `None` or a list of str, more special tokens.

    Raises:
        ValueError: for an additional special token missing from the vocabulary.
    """

    def __init__(self, vocabulary, vocabulary_size, tokens, additional_special_tokens):
        self._vocabulary = vocabulary
        self._vocabulary_size = vocabulary_size
        self._tokens = tokens
        additional_special_tokens = check_additional_special_tokens(
            vocabulary, additional_special_tokens, type(self).__name__
        )
        self._additional_special_tokens = additional_special_tokens
        specials = [token for token in tokens.values() if token] + additional_special_tokens
        self._special_pattern = added_token_pattern(specials)
        # The ids transformers' `decode(..., skip_special_tokens=True)` drops.
        self._skipped_ids = frozenset(vocabulary[token] for token in specials)
        # The token of each id, "" where no token has it.
        self._pieces = [""] * vocabulary_size
        for token, index in vocabulary.items():
            self._pieces[index] = token
        self._word_cache = {}
        self._pieces_tensor = None

    @property
    def vocabulary_size(self):
        """Number of ids: the largest id + 1."""
        return self._vocabulary_size

    @property
    def vocabulary(self):
        """A dict of token to id (a copy)."""
        return dict(self._vocabulary)

    @property
    def special_tokens(self):
        """The special tokens (kept whole when written in a text, dropped by `decode`): a list."""
        named = [token for token in self._tokens.values() if token]
        return named + list(self._additional_special_tokens)

    @property
    def pad_id(self):
        """The id batches are padded with."""
        return self._pad_id

    @property
    def unk_id(self):
        """The id of text the vocabulary cannot spell."""
        return self._unk_id

    @property
    def start_id(self):
        """The id the data pipelines put before a sentence."""
        return self._start_id

    @property
    def end_id(self):
        """The id the data pipelines put after a sentence; `detokenize` stops at it."""
        return self._end_id

    def _encode_text(self, text):
        ids = []
        for segment, is_special in split_added_tokens(text, self._special_pattern):
            if is_special:
                ids.append(self._vocabulary[segment])
                continue
            for word in self._words(segment):
                ids += self._word_ids(word)
        return ids

    def _word_ids(self, word):
        ids = self._word_cache.get(word)
        if ids is None:
            ids = self._split_word(word)
            if len(self._word_cache) >= _WORD_CACHE_SIZE:
                self._word_cache.clear()
            self._word_cache[word] = ids
        return ids

    def _encode_batch(self, texts):
        return [self._encode_text(text) for text in texts]

    def tokenize(self, inputs):
        """Splits strings into ids, without special ids (the pipelines add those).

        Runs in Python; inside a `tf.function` or `tf.data` map it runs through
        `tf.py_function` (which a SavedModel cannot hold).

        Args:
            inputs: a str, a list of str, or a `tf.string` tensor of rank 0 or 1.

        Returns:
            int32 ids: a 1-D `tf.Tensor` for a single string, a `tf.RaggedTensor`
            of shape `(batch, None)` for a batch.
        """
        if not tf.executing_eagerly() and isinstance(inputs, (tf.Tensor, tf.Variable)):
            return self._tokenize_graph(_texts_tensor(inputs))
        texts, single = _python_texts(inputs)
        rows = self._encode_batch(texts)
        if single:
            return tf.constant(rows[0], dtype=tf.int32)
        return _ragged_ids(rows)

    def _tokenize_graph(self, texts):
        single = texts.shape.rank == 0
        batch = tf.reshape(texts, [-1])

        def run(values):
            rows = self._encode_batch([value.decode("utf-8") for value in values.numpy()])
            flat = np.array([index for row in rows for index in row], dtype=np.int32)
            return flat, np.array([len(row) for row in rows], dtype=np.int64)

        values, lengths = tf.py_function(run, [batch], [tf.int32, tf.int64])
        values.set_shape([None])
        lengths.set_shape([None])
        ids = tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
        return ids[0] if single else ids

    def encode(self, texts):
        """Ids with the special ids, as transformers' `tokenizer(texts)["input_ids"]` gives.

        Args:
            texts: a str or a list of str.

        Returns:
            A list of int for a str, a list of lists of int for a list.
        """
        batch, single = _python_texts(texts)
        rows = [self._with_special_ids(row) for row in self._encode_batch(batch)]
        return rows[0] if single else rows

    def _kept(self, row):
        """`row` up to the first `end_id`, without the ids transformers skips in decoding."""
        if self._end_id in row:
            row = row[: row.index(self._end_id)]
        return [index for index in row if index not in self._skipped_ids]

    def detokenize(self, ids):
        """Turns ids back into text, as transformers' `decode(ids, skip_special_tokens=True)`.

        Everything from the first `end_id` on is dropped, and so are the special ids
        (pad, start and the others transformers skips).

        Args:
            ids: int ids of shape `(length,)` or `(batch, length)`: a list, NumPy
                array, `tf.Tensor` or `tf.RaggedTensor`.

        Returns:
            A `tf.string` tensor: a scalar for 1-D `ids`, shape `(batch,)` otherwise.

        Raises:
            ValueError: for `ids` of another rank.
        """
        ids, single = ids_rank_2(ids)
        if tf.executing_eagerly():
            texts = tf.constant(
                [self._decode_ids(self._kept(row)) for row in ids.to_list()],
                dtype=tf.string,
                shape=[ids.nrows()],
            )
        else:

            def run(values, row_splits):
                values, splits = values.numpy().tolist(), row_splits.numpy().tolist()
                rows = [values[start:end] for start, end in zip(splits, splits[1:])]
                decoded = [self._decode_ids(self._kept(row)) for row in rows]
                return np.array([text.encode("utf-8") for text in decoded], dtype=object)

            texts = tf.py_function(run, [ids.flat_values, ids.row_splits], tf.string)
            texts.set_shape([None])
        return texts[0] if single else texts

    def decode(self, ids):
        """Like `detokenize`, but returns Python `str` (a list for a batch); eager only.

        Args:
            ids: int ids of shape `(length,)` or `(batch, length)`.

        Returns:
            A str for 1-D `ids`, else a list of str.
        """
        return python_strings(self.detokenize(ids))

    def id_to_piece(self, ids):
        """Returns the tokens (`tf.string`) of int `ids`; "" for an id no token has.

        Args:
            ids: an int or int ids of any shape (a list, NumPy array or tensor).

        Returns:
            A `tf.string` tensor of the shape of `ids`.
        """
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.id_to_piece, ids)
        if self._pieces_tensor is None:
            self._pieces_tensor = tf.constant(self._pieces, dtype=tf.string)
        ids = tf.convert_to_tensor(ids, dtype=tf.int32)
        valid = (ids >= 0) & (ids < len(self._pieces))
        pieces = tf.gather(self._pieces_tensor, tf.clip_by_value(ids, 0, len(self._pieces) - 1))
        return tf.where(valid, pieces, tf.constant("", dtype=tf.string))

    def save_huggingface(self, directory):
        """Writes the files of the transformers tokenizer this one reproduces.

        The vocabulary (`vocab.txt` for BERT's `BertTokenizer`; `vocab.json` and
        `merges.txt` for GPT-2's `GPT2Tokenizer`) and `tokenizer_config.json`;
        `transformers.AutoTokenizer.from_pretrained(directory)` then gives the ids
        this tokenizer gives.

        Args:
            directory: str or path, folder to write into; created if missing.

        Example:

        >>> import os, tempfile
        >>> from keras_transformer.text import BytePairTokenizer, WordPieceTokenizer
        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
        >>> directory = tempfile.mkdtemp()
        >>> tokenizer.save_huggingface(directory)
        >>> sorted(os.listdir(directory))
        ['tokenizer_config.json', 'vocab.txt']
        >>> alphabet = sorted(BytePairTokenizer.byte_alphabet())
        >>> vocabulary = {token: i for i, token in enumerate(alphabet + ["<|endoftext|>"])}
        >>> directory = tempfile.mkdtemp()
        >>> BytePairTokenizer(vocabulary, merges=[]).save_huggingface(directory)
        >>> sorted(os.listdir(directory))
        ['merges.txt', 'tokenizer_config.json', 'vocab.json']
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        self._write_vocabulary(directory)
        write_tokenizer_config(directory, self._tokenizer_config(), self._additional_special_tokens)

    def save(self, directory):
        """Writes the Hugging Face files (`save_huggingface`); `load` reads them back.

        Args:
            directory: str or path, folder to write into; created if missing.
        """
        self.save_huggingface(directory)

    @classmethod
    def load(cls, directory):
        """Reads a tokenizer written by `save` (the same as `from_huggingface`).

        Args:
            directory: str or path, the folder given to `save`.

        Returns:
            A tokenizer giving the same ids as the saved one.
        """
        return cls.from_huggingface(directory)
