"""Special tokens written in a text, cut out in TensorFlow ops (the graph tokenizers' first step).

`WordPieceGraphTokenizer` and `BytePairGraphTokenizer` keep `"[MASK]"` or `"<|endoftext|>"`
whole, as their Python tokenizers do with `tokenizer_files.split_added_tokens`; this module
does the same cut with a regular expression and a `tf.lookup` table, which a SavedModel holds.
"""

import tensorflow as tf

# Cuts the segments apart: valid UTF-8 text never holds the byte 0xFF. (tensorflow-text's
# `regex_split` would cut in one op, but it stops a text at its first U+0000.)
_CUT = b"\xff"


def _re2_literal(text):
    """`text` as an RE2 pattern matching it literally."""
    return "".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


class SpecialTokenSplitter(tf.Module):
    """Cuts texts into segments, each special token a segment of its own.

    The tokens are found leftmost first, the longest first where several start at
    the same place (transformers' added-token trie; the Python tokenizers'
    `added_token_pattern`); empty segments are left out. Bytes that are not UTF-8
    become U+FFFD first, as Python's `bytes.decode("utf-8", errors="replace")`
    makes them (one for each maximal invalid sequence).

    Args:
        special_ids: dict of special token (str) to its id.
        name: str, the module's name. Defaults to `None`.

    Example:

    >>> import tensorflow as tf
    >>> splitter = SpecialTokenSplitter({"[MASK]": 4, "[SEP]": 3})
    >>> segments, ids = splitter(tf.constant(["a [MASK] b[SEP]", ""]))
    >>> segments.to_list(), ids.to_list()
    ([[b'a ', b'[MASK]', b' b', b'[SEP]'], []], [[-1, 4, -1, 3], []])
    """

    def __init__(self, special_ids, name=None):
        super().__init__(name=name)
        ordered = sorted(special_ids, key=lambda token: (-len(token), token))
        self._pattern = "|".join(map(_re2_literal, ordered)) if ordered else None
        self._table = None
        if ordered:
            self._table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(ordered, tf.string),
                    tf.constant([special_ids[token] for token in ordered], tf.int32),
                ),
                default_value=tf.constant(-1, tf.int32),
            )

    def __call__(self, texts):
        """Cuts a batch of texts.

        Args:
            texts: a 1-D `tf.string` tensor.

        Returns:
            `(segments, ids)`: `tf.RaggedTensor`s of shape `(batch, None)`, the
            non-empty segments of each text in order (`tf.string`) and, for each
            segment, the id of the special token it is, or `-1` for plain text
            (int32).
        """
        # Bytes that are not UTF-8 read as Python's `decode("utf-8", errors="replace")`
        # reads them (the Python tokenizers refuse them); the text then holds no 0xFF.
        texts = tf.strings.unicode_transcode(
            texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        if self._pattern is None:
            segments = tf.RaggedTensor.from_tensor(tf.expand_dims(texts, 1))
        else:
            marked = tf.strings.regex_replace(texts, self._pattern, _CUT + b"\\0" + _CUT)
            segments = tf.strings.split(marked, sep=_CUT)
        segments = tf.ragged.boolean_mask(segments, tf.strings.length(segments) > 0)
        if self._table is None:
            ids = tf.ragged.map_flat_values(lambda s: tf.fill(tf.shape(s), -1), segments)
        else:
            # Only a special token's own segment equals it: a match in a plain segment would
            # have been cut out.
            ids = tf.ragged.map_flat_values(self._table.lookup, segments)
        return segments, ids
