"""BERT's WordPiece tokenization in TensorFlow ops, which a SavedModel holds.

`WordPieceTokenizer` runs in Python (through `tf.py_function` inside a graph), which a
SavedModel cannot hold; `WordPieceGraphTokenizer` gives its ids with TensorFlow ops:
code-point tables made from Python's `unicodedata` (so they classify characters as the
Python tokenizer does), ICU's NFD from tensorflow-text, and tensorflow-text's
`FastWordpieceTokenizer` for the greedy longest-match.
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf

from keras_transformer.text import wordpiece_tokenizer
from keras_transformer.text.graph_tokenizer import GraphTokenizer
from keras_transformer.text.special_token_splitter import SpecialTokenSplitter

_SPACE = ord(" ")
# A code point's class, as the Python tokenizer sees it: bits 0-1 what its clean-up does
# (keep, make a space, drop, or put spaces around a CJK ideograph), bit 2 a
# non-spacing mark (dropped with the accents), bit 3 punctuation (a word of its own).
_KEEP, _TO_SPACE, _DROP, _CJK = 0, 1, 2, 3
_RAW_MASK = 3
_MARK = 4
_PUNCTUATION = 8
_LAST_CODE_POINT = 0x10FFFF


@functools.lru_cache(maxsize=1)
def _code_point_classes():
    """`(starts, classes)`: the class of every code point, as runs of equal classes.

    Code point `c` has class `classes[i]` for the last `i` with `starts[i] <= c`.
    """
    classes = np.zeros(_LAST_CODE_POINT + 1, np.int32)
    for code_point in range(_LAST_CODE_POINT + 1):
        character = chr(code_point)
        category = unicodedata.category(character)
        if character in wordpiece_tokenizer.WHITESPACE:
            value = _TO_SPACE
        elif code_point in (0, 0xFFFD) or category.startswith("C"):
            value = _DROP
        elif code_point >= 0x3400 and wordpiece_tokenizer.is_cjk(code_point):
            value = _CJK
        else:
            value = _KEEP
        if category == "Mn":
            value |= _MARK
        if wordpiece_tokenizer.is_punctuation(character):
            value |= _PUNCTUATION
        classes[code_point] = value
    starts = np.concatenate([[0], np.flatnonzero(np.diff(classes)) + 1]).astype(np.int32)
    return starts, classes[starts]


@functools.lru_cache(maxsize=1)
def _lowercase_map():
    """`(code points, first, second)`: what `str.lower` makes of each code point it changes.

    `second` is the second code point of a two-character result (U+0130 becomes
    "i" + U+0307), else -1. No code point lowers to more than two.
    """
    keys, first, second = [], [], []
    for code_point in range(_LAST_CODE_POINT + 1):
        if 0xD800 <= code_point < 0xE000:
            continue
        lower = chr(code_point).lower()
        if lower != chr(code_point):
            if len(lower) > 2:  # pragma: no cover - no such code point up to Unicode 16
                raise NotImplementedError(f"U+{code_point:04X} lowers to {len(lower)} characters")
            keys.append(code_point)
            first.append(ord(lower[0]))
            second.append(ord(lower[1]) if len(lower) == 2 else -1)
    return keys, first, second


def _int_table(keys, values):
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.int64), tf.constant(values, tf.int64)
        ),
        default_value=tf.constant(-1, tf.int64),
    )


def _expand(code_points, choices):
    """Each code point of a ragged `(rows, None)` tensor replaced by 0 to `len(choices)` ones.

    `choices` is a list of `(values, mask)` pairs of flat tensors: code point `i` becomes
    the `values[i]` whose `mask[i]` is true, in the order of `choices`.
    """
    values = tf.stack([tf.cast(value, tf.int32) for value, _ in choices], axis=1)
    masks = tf.stack([mask for _, mask in choices], axis=1)
    counts = tf.reduce_sum(tf.cast(masks, tf.int64), axis=1)
    row_lengths = tf.math.unsorted_segment_sum(
        counts, code_points.value_rowids(), code_points.nrows()
    )
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(values, masks), row_lengths, validate=False
    )


class WordPieceGraphTokenizer(GraphTokenizer):
    """A `WordPieceTokenizer`'s `tokenize` in TensorFlow ops, which a SavedModel holds.

    It gives the ids of
    [`WordPieceTokenizer.tokenize`][keras_transformer.text.WordPieceTokenizer.tokenize]
    (transformers' `BertTokenizer` less `[CLS]` and `[SEP]`): special tokens written
    in the text kept whole, BERT's clean-up (control characters, U+0000 and U+FFFD
    dropped, every Unicode space made a space, spaces around CJK ideographs), NFD
    accent stripping and lower-casing per the tokenizer's options, words split on
    spaces and punctuation, `[UNK]` for a word of more than 100 characters, then
    greedy longest-match WordPiece (tensorflow-text's `FastWordpieceTokenizer`,
    which gives the same pieces as that greedy search, `[UNK]` for a word it
    cannot spell).

    The character classes (spaces, controls, marks, punctuation, CJK) and
    lower-casing are tables made from the `unicodedata` of the Python that builds
    this object, so they are the Python tokenizer's own; NFD is ICU's (from
    tensorflow-text), which agrees with `unicodedata.normalize("NFD", ...)` on
    every character that `unicodedata` knows and the tokenizer keeps (checked on
    every code point, Unicode 14). The one difference: bytes that are not UTF-8
    are read here as `bytes.decode("utf-8", errors="replace")` reads them (each
    invalid sequence a U+FFFD, which the clean-up then drops), where the Python
    tokenizer refuses the text (a `UnicodeDecodeError`).

    `export_serving` builds one to serve a classifier with a `WordPieceTokenizer`;
    it also tokenizes in `tf.data` without Python. Loading a SavedModel that holds
    it needs `import tensorflow_text`.

    Args:
        tokenizer: the
            [`WordPieceTokenizer`][keras_transformer.text.WordPieceTokenizer] whose
            ids to give.
        name: str, the module's name. Defaults to `None`.

    Raises:
        ValueError: for a `tokenizer` that is not a `WordPieceTokenizer`.

    Example:

    >>> import os, tempfile
    >>> from keras_transformer.text import WordPieceTokenizer
    >>> words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "run", "##s", "!"]
    >>> tokenizer = WordPieceTokenizer(words)
    >>> graph = WordPieceGraphTokenizer(tokenizer)
    >>> graph.tokenize(["The dog runs!", "Dög [MASK]"]).to_list()
    [[5, 6, 7, 8, 9], [6, 4]]
    >>> tokenizer.tokenize(["The dog runs!", "Dög [MASK]"]).to_list()
    [[5, 6, 7, 8, 9], [6, 4]]
    """

    def __init__(self, tokenizer, name=None):
        if not isinstance(tokenizer, wordpiece_tokenizer.WordPieceTokenizer):
            raise ValueError(
                f"`tokenizer` must be a `WordPieceTokenizer`. Received: {type(tokenizer).__name__}."
            )
        import tensorflow_text as tf_text

        super().__init__(tokenizer, name=name)
        self._lowercase = tokenizer.lowercase
        self._strip_accents = tokenizer.strip_accents
        self._tokenize_chinese_chars = tokenizer.tokenize_chinese_chars
        vocabulary = tokenizer.vocabulary
        specials = tokenizer.special_tokens
        self._splitter = SpecialTokenSplitter({token: vocabulary[token] for token in specials})
        starts, classes = _code_point_classes()
        self._class_starts = tf.constant(starts, tf.int32)
        self._classes = tf.constant(classes, tf.int32)
        keys, first, second = _lowercase_map()
        self._lower_first = _int_table(keys, first)
        self._lower_second = _int_table(keys, second)
        # No word is empty or holds a space or U+0000 (dropped by the clean-up), so such
        # tokens could never be matched (and FastWordpieceTokenizer refuses U+0000).
        tokens = [t for t in vocabulary if t and " " not in t and "\x00" not in t]
        unk_token = next(token for token in specials if vocabulary[token] == self._unk_id)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            tokens,
            suffix_indicator="##",
            # Words of more than 100 characters are [UNK] before; these bytes hold the rest.
            max_bytes_per_word=4 * wordpiece_tokenizer.MAX_INPUT_CHARS_PER_WORD,
            token_out_type=tf.string,
            unknown_token=unk_token,
            no_pretokenization=True,
        )
        self._vocabulary_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(tokens, tf.string),
                tf.constant([vocabulary[token] for token in tokens], tf.int32),
            ),
            default_value=tf.constant(self._unk_id, tf.int32),
        )

    def _ids(self, texts):
        segments, special_ids = self._splitter(texts)
        flat_ids = special_ids.flat_values
        is_special = flat_ids >= 0
        plain = tf.where(is_special, "", segments.flat_values)
        words = self._words(plain)
        pieces = self._word_ids(words.flat_values)
        pieces = words.with_flat_values(pieces).merge_dims(1, 2)
        return self._joined(segments, flat_ids, is_special, pieces)

    def _class_of(self, code_points):
        runs = tf.searchsorted(self._class_starts, code_points, side="right") - 1
        return tf.gather(self._classes, runs)

    def _words(self, texts):
        """BERT's words of each text (no special tokens in them): a `(texts, None)` ragged."""
        import tensorflow_text as tf_text

        code_points = tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        values = code_points.flat_values
        raw = self._class_of(values) & _RAW_MASK
        cjk = raw == _CJK if self._tokenize_chinese_chars else tf.zeros_like(raw, tf.bool)
        space = tf.fill(tf.shape(values), _SPACE)
        cleaned = tf.where(raw == _TO_SPACE, space, values)
        code_points = _expand(code_points, [(space, cjk), (cleaned, raw != _DROP), (space, cjk)])
        if self._strip_accents:
            text = tf.strings.unicode_encode(code_points, "UTF-8")
            code_points = tf.strings.unicode_decode(tf_text.normalize_utf8(text, "NFD"), "UTF-8")
            values = code_points.flat_values
            marks = (self._class_of(values) & _MARK) > 0
            code_points = _expand(code_points, [(values, ~marks)])
        if self._lowercase:
            values = code_points.flat_values
            wide = tf.cast(values, tf.int64)
            first = self._lower_first.lookup(wide)
            second = self._lower_second.lookup(wide)
            first = tf.where(first >= 0, first, wide)
            always = tf.ones_like(values, tf.bool)
            code_points = _expand(code_points, [(first, always), (second, second >= 0)])
        values = code_points.flat_values
        punctuation = (self._class_of(values) & _PUNCTUATION) > 0
        space = tf.fill(tf.shape(values), _SPACE)
        always = tf.ones_like(values, tf.bool)
        code_points = _expand(
            code_points, [(space, punctuation), (values, always), (space, punctuation)]
        )
        words = tf.strings.split(tf.strings.unicode_encode(code_points, "UTF-8"), sep=" ")
        return tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)

    def _word_ids(self, words):
        """The WordPiece ids of each word: a `(words, None)` ragged tensor."""
        too_long = (
            tf.strings.length(words, unit="UTF8_CHAR")
            > wordpiece_tokenizer.MAX_INPUT_CHARS_PER_WORD
        )
        pieces = self._wordpiece.tokenize(tf.where(too_long, "", words))
        ids = tf.ragged.map_flat_values(self._vocabulary_table.lookup, pieces)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(too_long, tf.int32))], self._unk_id),
            tf.cast(too_long, tf.int64),
            validate=False,
        )
        return tf.concat([unknown, ids], axis=1)
