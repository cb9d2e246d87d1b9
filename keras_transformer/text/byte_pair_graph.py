"""GPT-2's byte-level BPE in TensorFlow ops, which a SavedModel holds.

`BytePairTokenizer` runs in Python (through `tf.py_function` inside a graph), which a
SavedModel cannot hold; `BytePairGraphTokenizer` gives its ids, and its decoded text,
with TensorFlow ops. GPT-2's pre-tokenisation needs a lookahead (`\\s+(?!\\S)`) that RE2
lacks, and `\\p{L}` / `\\p{N}` as the `regex` package defines them; so each character is
first spelled by its class in a one-byte alphabet (from tables made with `regex`
itself), the one place where the lookahead matters is marked in that spelling, and RE2
cuts the spelled text (the cuts then apply to the text's own characters).
"""

import functools

import numpy as np
import tensorflow as tf

from keras_transformer.text import byte_pair_tokenizer
from keras_transformer.text.graph_tokenizer import GraphTokenizer
from keras_transformer.text.python_tokenizer import ids_rank_2
from keras_transformer.text.special_token_splitter import SpecialTokenSplitter

_LAST_CODE_POINT = 0x10FFFF
# The spelling: a letter is "a" (the letters of "'s", "'t", "'re", "'ve", "'m", "'ll" and
# "'d" stay themselves), a number "0", the space " ", other whitespace "\t", the
# apostrophe "'", anything else "!". The last whitespace character of a run of two or
# more that a non-space follows is "_" (a space) or "^" (other whitespace): GPT-2's
# `\s+(?!\S)` leaves it to start the next piece.
_LETTERS = "adelmrstv"
_CONTRACTION_LETTERS = "delmrstv"
_SPACE, _OTHER_SPACE, _LAST_SPACE, _LAST_OTHER_SPACE = " ", "\t", "_", "^"
_PIECES = (
    "'s|'t|'re|'ve|'m|'ll|'d"
    f"|[ _]?[{_LETTERS}]+|[ _]?0+|[ _]?[!']+"
    r"|[ \t]+|\^"
)
_CUT = b"\xff"  # valid UTF-8 never holds it, nor does the spelling
_NO_RANK = np.iinfo(np.int32).max


@functools.lru_cache(maxsize=1)
def _spelling():
    """`(starts, letters)`: each code point's one-byte spelling, as runs of equal spellings.

    Code point `c` is spelled `letters[i]` (a byte value) for the last `i` with
    `starts[i] <= c`. The classes are those of the `regex` package, which
    `BytePairTokenizer` splits with.
    """
    import regex

    spelled = np.full(_LAST_CODE_POINT + 1, ord("!"), np.int32)
    code_points = np.array(
        [c for c in range(_LAST_CODE_POINT + 1) if not 0xD800 <= c < 0xE000], np.int32
    )
    everything = "".join(map(chr, code_points))
    for pattern, letter in ((r"\p{L}+", "a"), (r"\p{N}+", "0"), (r"\s+", _OTHER_SPACE)):
        for match in regex.finditer(pattern, everything):
            spelled[code_points[match.start()] : code_points[match.end() - 1] + 1] = ord(letter)
    for character in (*_CONTRACTION_LETTERS, _SPACE, "'"):
        spelled[ord(character)] = ord(character)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(spelled)) + 1]).astype(np.int32)
    return starts, spelled[starts]


def _previous(values, fill):
    """`values` shifted one place right, `fill` first: each element's predecessor."""
    return tf.concat([tf.constant([fill], values.dtype), values], axis=0)[:-1]


def _next(values, fill):
    """`values` shifted one place left, `fill` last: each element's successor."""
    return tf.concat([values, tf.constant([fill], values.dtype)], axis=0)[1:]


def _table(keys, values, key_dtype, value_dtype, default):
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, key_dtype), tf.constant(values, value_dtype)
        ),
        default_value=tf.constant(default, value_dtype),
    )


class BytePairGraphTokenizer(GraphTokenizer):
    """A `BytePairTokenizer`'s `tokenize` and `detokenize` in TensorFlow ops.

    It gives the ids of
    [`BytePairTokenizer.tokenize`][keras_transformer.text.BytePairTokenizer.tokenize]
    and the text of its
    [`detokenize`][keras_transformer.text.BytePairTokenizer.detokenize]
    (transformers' `GPT2Tokenizer`): special tokens written in the text kept whole,
    a space put first with `add_prefix_space`, GPT-2's pre-tokenisation
    (contractions, ` ?` + letters, ` ?` + digits, ` ?` + other symbols, whitespace
    runs less the last character before a non-space), each piece's UTF-8 bytes
    spelled in GPT-2's byte alphabet, byte symbols missing from the vocabulary
    dropped, then merged pair by pair, the lowest merge rank first, every
    occurrence of that pair left to right, until no pair has a rank.

    Letters, numbers and whitespace are tables made with the `regex` package (the
    classes `BytePairTokenizer` splits with), so the pieces are the Python
    tokenizer's; the merges run in a `tf.while_loop`, one merge rank per piece and
    step, as many steps as the longest piece needs. The one difference: bytes that
    are not UTF-8 are read here as `bytes.decode("utf-8", errors="replace")` reads
    them (each invalid sequence a U+FFFD, whose 3 bytes are `ï¿½` in the byte
    alphabet), where the Python tokenizer refuses the text (a `UnicodeDecodeError`).

    `export_serving` builds one to serve a classifier or a language model with a
    `BytePairTokenizer`; it also tokenizes in `tf.data` without Python. Loading a
    SavedModel that holds it needs only TensorFlow.

    Args:
        tokenizer: the
            [`BytePairTokenizer`][keras_transformer.text.BytePairTokenizer] whose ids
            to give.
        name: str, the module's name. Defaults to `None`.

    Raises:
        ValueError: for a `tokenizer` that is not a `BytePairTokenizer`.

    Example:

    >>> from keras_transformer.text import BytePairTokenizer
    >>> alphabet = sorted(BytePairTokenizer.byte_alphabet())
    >>> merges = ["h e", "l l", "he ll", "hell o", "Ġ w"]
    >>> tokens = alphabet + ["he", "ll", "hell", "hello", "Ġw", "<|endoftext|>"]
    >>> tokenizer = BytePairTokenizer({t: i for i, t in enumerate(tokens)}, merges)
    >>> graph = BytePairGraphTokenizer(tokenizer)
    >>> ids = graph.tokenize(["hello wow", "hello  <|endoftext|>"])
    >>> ids.to_list() == tokenizer.tokenize(["hello wow", "hello  <|endoftext|>"]).to_list()
    True
    >>> graph.detokenize(ids).numpy().tolist()
    [b'hello wow', b'hello  ']
    """

    def __init__(self, tokenizer, name=None):
        if not isinstance(tokenizer, byte_pair_tokenizer.BytePairTokenizer):
            raise ValueError(
                f"`tokenizer` must be a `BytePairTokenizer`. Received: {type(tokenizer).__name__}."
            )
        super().__init__(tokenizer, name=name)
        self._add_prefix_space = tokenizer.add_prefix_space
        vocabulary = tokenizer.vocabulary
        specials = tokenizer.special_tokens
        self._splitter = SpecialTokenSplitter({token: vocabulary[token] for token in specials})
        starts, letters = _spelling()
        self._spelling_starts = tf.constant(starts, tf.int32)
        self._spelling_letters = tf.constant(letters, tf.int32)
        encoder = byte_pair_tokenizer.bytes_to_unicode()
        # Each byte as a 1-byte string, and as the symbol that spells it ("" when the
        # vocabulary lacks it: the Python tokenizer drops those).
        self._byte_symbols = _table(
            [bytes([byte]) for byte in range(256)],
            [encoder[byte] if encoder[byte] in vocabulary else "" for byte in range(256)],
            tf.string,
            tf.string,
            "",
        )
        # A pair listed twice takes its last rank, as in the Python tokenizer.
        ranks = {f"{left} {right}": rank for rank, (left, right) in enumerate(tokenizer.merges)}
        # A table needs a key: " " alone is no pair of symbols (a tokenizer without merges).
        ranks = ranks or {" ": _NO_RANK}
        self._ranks = _table(list(ranks), list(ranks.values()), tf.string, tf.int32, _NO_RANK)
        self._vocabulary_table = _table(
            list(vocabulary), list(vocabulary.values()), tf.string, tf.int32, -1
        )
        # Decoding: the bytes of each id, as `BytePairTokenizer._decode_ids` makes them.
        decoder = {character: byte for byte, character in encoder.items()}
        surfaces = [b""] * self._vocabulary_size  # an id no token has decodes to nothing
        for token, index in vocabulary.items():
            if all(character in decoder for character in token):
                surfaces[index] = bytes(decoder[character] for character in token)
            else:
                surfaces[index] = token.encode("utf-8")
        self._surfaces = tf.constant(surfaces, tf.string)
        # `decode(ids, skip_special_tokens=True)` drops the special tokens' ids.
        skipped = np.zeros(self._vocabulary_size, bool)
        skipped[[vocabulary[token] for token in specials]] = True
        self._skipped = tf.constant(skipped)

    def detokenize(self, ids):
        """Turns ids back into text, as `BytePairTokenizer.detokenize`.

        Everything from the first `end_id` on is dropped, and so are the special
        ids; the tokens' bytes are joined and decoded as UTF-8, invalid bytes as
        U+FFFD (Python's `errors="replace"`).

        Args:
            ids: int ids of shape `(length,)` or `(batch, length)`: a list, NumPy
                array, `tf.Tensor` or `tf.RaggedTensor`.

        Returns:
            A `tf.string` tensor: a scalar for 1-D `ids`, shape `(batch,)` otherwise.

        Raises:
            ValueError: for `ids` of another rank.
        """
        ids, single = ids_rank_2(ids)
        before_end = tf.equal(
            tf.math.cumsum(tf.cast(tf.equal(ids, self._end_id), tf.int32), axis=1), 0
        )
        known = (ids >= 0) & (ids < self._vocabulary_size)
        index = tf.ragged.map_flat_values(tf.clip_by_value, ids, 0, self._vocabulary_size - 1)
        skipped = known & tf.ragged.map_flat_values(tf.gather, self._skipped, index)
        surfaces = tf.ragged.map_flat_values(tf.gather, self._surfaces, index)
        surfaces = tf.ragged.map_flat_values(tf.where, known, surfaces, "")
        kept = tf.ragged.boolean_mask(surfaces, before_end & ~skipped)
        text = tf.strings.unicode_transcode(
            tf.strings.reduce_join(kept, axis=1),
            "UTF-8",
            "UTF-8",
            errors="replace",
            replacement_char=0xFFFD,
        )
        return text[0] if single else text

    def _ids(self, texts):
        segments, special_ids = self._splitter(texts)
        flat_ids = special_ids.flat_values
        is_special = flat_ids >= 0
        plain = segments.flat_values
        if self._add_prefix_space:
            starts_with_space = tf.strings.substr(plain, 0, 1) == " "
            plain = tf.where(starts_with_space, plain, tf.strings.join([" ", plain]))
        plain = tf.where(is_special, "", plain)
        pieces = self._pieces(plain)
        symbols = self._merge(self._byte_symbols_of(pieces.flat_values))
        piece_ids = tf.ragged.map_flat_values(self._vocabulary_table.lookup, symbols)
        piece_ids = pieces.with_flat_values(piece_ids).merge_dims(1, 2)
        return self._joined(segments, flat_ids, is_special, piece_ids)

    def _pieces(self, texts):
        """GPT-2's pre-tokenised pieces of each text: a `(texts, None)` ragged of strings."""
        code_points = tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        values = code_points.flat_values
        runs = tf.searchsorted(self._spelling_starts, values, side="right") - 1
        letters = tf.gather(self._spelling_letters, runs)
        # The last character of a whitespace run of two or more that a non-space follows.
        space = (letters == ord(_SPACE)) | (letters == ord(_OTHER_SPACE))
        rows = code_points.value_rowids()
        space_before = (_previous(rows, -1) == rows) & _previous(space, False)
        other_after = (_next(rows, -1) == rows) & ~_next(space, True)
        last = space & space_before & other_after
        letters = tf.where(
            last,
            tf.where(letters == ord(_SPACE), ord(_LAST_SPACE), ord(_LAST_OTHER_SPACE)),
            letters,
        )
        spelled = tf.strings.unicode_encode(code_points.with_flat_values(letters), "UTF-8")
        cut = tf.strings.split(tf.strings.regex_replace(spelled, _PIECES, b"\\0" + _CUT), _CUT)
        # Every character of the spelling is one byte, so the lengths count characters.
        lengths = tf.strings.length(cut)
        lengths = tf.ragged.boolean_mask(lengths, lengths > 0)
        pieces = tf.RaggedTensor.from_row_lengths(
            values, tf.cast(lengths.flat_values, tf.int64), validate=False
        )
        return lengths.with_flat_values(tf.strings.unicode_encode(pieces, "UTF-8"))

    def _byte_symbols_of(self, pieces):
        """Each piece's bytes as GPT-2's byte symbols, less those the vocabulary lacks."""
        symbols = tf.strings.bytes_split(pieces)
        symbols = tf.ragged.map_flat_values(self._byte_symbols.lookup, symbols)
        return tf.ragged.boolean_mask(symbols, tf.strings.length(symbols) > 0)

    def _merge(self, symbols):
        """Merges each row's symbols by rank until none of its pairs has one."""

        def step(values, lengths, _):
            rows = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), lengths)
            count = tf.size(values, out_type=tf.int64)
            following = _next(values, "")
            has_next = _next(rows, -1) == rows
            ranks = self._ranks.lookup(tf.strings.join([values, following], separator=" "))
            ranks = tf.where(has_next, ranks, _NO_RANK)
            best = tf.math.unsorted_segment_min(ranks, rows, tf.size(lengths))
            match = has_next & (ranks < _NO_RANK) & (ranks == tf.gather(best, rows))
            # Overlapping matches (a pair of one symbol twice, "a a a") merge left to right:
            # the first, third, ... of each run of consecutive matches.
            run_start = match & ~_previous(match, False)
            run_number = tf.cumsum(tf.cast(run_start, tf.int64))  # 0 before the first run
            run_starts = tf.concat([[0], tf.reshape(tf.where(run_start), [-1])], axis=0)
            first = tf.gather(run_starts, run_number)
            merged = match & ((tf.range(count) - first) % 2 == 0)
            removed = _previous(merged, False)
            new_values = tf.boolean_mask(
                tf.where(merged, tf.strings.join([values, following]), values), ~removed
            )
            new_lengths = lengths - tf.math.unsorted_segment_sum(
                tf.cast(merged, tf.int64), rows, tf.size(lengths)
            )
            return new_values, new_lengths, tf.reduce_any(merged)

        values, lengths, _ = tf.while_loop(
            lambda values, lengths, again: again,
            step,
            (symbols.flat_values, symbols.row_lengths(), tf.constant(True)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])),
        )
        return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
