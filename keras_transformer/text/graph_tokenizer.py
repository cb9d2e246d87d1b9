"""What the tokenizers made of TensorFlow ops share: their special ids and a checked `tokenize`."""

import tensorflow as tf


class GraphTokenizer(tf.Module):
    """The base of the tokenizers a SavedModel can hold.

    It copies the special ids of the Python tokenizer it mirrors and checks the
    rank of `tokenize`'s input; a subclass splits a 1-D batch of strings in
    `_ids(texts)`, returning a `tf.RaggedTensor` of int32 ids.

    Args:
        tokenizer: the Python tokenizer whose ids the subclass reproduces.
        name: str, the `tf.Module`'s name. Defaults to `None`.
    """

    def __init__(self, tokenizer, name=None):
        super().__init__(name=name)
        self._vocabulary_size = tokenizer.vocabulary_size
        self._pad_id, self._unk_id = tokenizer.pad_id, tokenizer.unk_id
        self._start_id, self._end_id = tokenizer.start_id, tokenizer.end_id

    @property
    def vocabulary_size(self):
        """Number of ids, as the Python tokenizer's."""
        return self._vocabulary_size

    @property
    def pad_id(self):
        """The id batches are padded with (BERT: `[PAD]`; GPT-2: `<|endoftext|>`)."""
        return self._pad_id

    @property
    def unk_id(self):
        """The unknown token's id (BERT: `[UNK]`; GPT-2: `<|endoftext|>`)."""
        return self._unk_id

    @property
    def start_id(self):
        """The start token's id (BERT: `[CLS]`; GPT-2: `<|endoftext|>`)."""
        return self._start_id

    @property
    def end_id(self):
        """The end token's id (BERT: `[SEP]`; GPT-2: `<|endoftext|>`)."""
        return self._end_id

    def tokenize(self, inputs):
        """Splits strings into ids, without the special ids the pipelines add.

        Args:
            inputs: a str, a list of str, or a `tf.string` tensor of rank 0 or 1.

        Returns:
            int32 ids: a 1-D `tf.Tensor` for a single string, a `tf.RaggedTensor`
            of shape `(batch, None)` for a batch.

        Raises:
            ValueError: for `inputs` of another rank.
        """
        texts = tf.convert_to_tensor(inputs, dtype=tf.string)
        if texts.shape.rank not in (0, 1):
            raise ValueError(
                "`inputs` must be a str, a list of str or a `tf.string` tensor of rank 0 or 1. "
                f"Received: shape={texts.shape}"
            )
        if texts.shape.rank == 0:
            return self._ids(tf.expand_dims(texts, 0))[0]
        return self._ids(texts)

    def _ids(self, texts):
        raise NotImplementedError

    @staticmethod
    def _joined(segments, special_ids, is_special, piece_ids):
        """Each text's ids: per segment, its special token's id or its pieces' ids.

        Args:
            segments: `(texts, None)` ragged, the texts split around special tokens.
            special_ids: int32, one per segment: its special token's id, or -1.
            is_special: bool, one per segment: `special_ids >= 0`.
            piece_ids: `(segments, None)` ragged ids of the segments' pieces (none for a
                special segment).
        """
        first = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(special_ids, is_special), tf.cast(is_special, tf.int64), validate=False
        )
        ids = tf.concat([first, piece_ids], axis=1)
        return segments.with_flat_values(ids).merge_dims(1, 2)
