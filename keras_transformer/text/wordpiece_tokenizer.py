"""BERT's WordPiece tokenizer, read from and written to Hugging Face `vocab.txt` folders.

The module also holds what the Hugging Face tokenizers of this package share
(`BytePairTokenizer` and `MarianTokenizer` import it): reading the JSON files of a
checkpoint folder, splitting off special tokens written in the text, and turning
Python ids into the `tf.Tensor` / `tf.RaggedTensor` layout of `SubwordTokenizer`.
"""

import json
import os
import re
import unicodedata

import numpy as np
import tensorflow as tf

from keras_transformer.validation import is_int

VOCABULARY_FILENAME = "vocab.txt"
TOKENIZER_CONFIG_FILENAME = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILENAME = "special_tokens_map.json"
MODEL_CONFIG_FILENAME = "config.json"
TOKENIZER_JSON_FILENAME = "tokenizer.json"

# ---------------------------------------------------------------------------------------
# Shared by the three Hugging Face tokenizers.

_SPECIAL_TOKEN_KEYS = frozenset(
    ("unk_token", "eos_token", "bos_token", "pad_token", "sep_token", "cls_token", "mask_token")
)


def read_json_file(path, what):
    """The JSON value in `path`; `ValueError` naming the file when it is not valid JSON."""
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"'{path}' is not valid JSON ({error}); it should hold {what}.") from error


def write_json_file(path, value):
    with open(path, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=2, ensure_ascii=False)
        file.write("\n")


def require_file(directory, filename, class_name, advice):
    """The path of `filename` in `directory`; `ValueError` naming the file when it is missing."""
    path = os.path.join(directory, filename)
    if not os.path.isfile(path):
        if not os.path.isdir(directory):
            raise ValueError(
                f"`directory` must be a folder of Hugging Face tokenizer files. Received: "
                f"directory='{directory}', which is not a folder."
            )
        raise ValueError(
            f"'{filename}' is missing from '{directory}': `{class_name}.from_huggingface` "
            f"needs it. {advice}"
        )
    return path


def token_content(value):
    """A special token as written in Hugging Face configs (a str or an AddedToken dict)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def read_tokenizer_options(directory):
    """The options of a Hugging Face checkpoint folder, as transformers reads them.

    Returns a dict: `special_tokens_map.json` overridden by `tokenizer_config.json`
    (special tokens as str), plus `"added_tokens"`, a `{content: id}` dict of the
    special `added_tokens_decoder` entries, and `"model_config"`, the `config.json` object
    (or `{}`).
    """
    options = {}
    added = {}
    for filename in (SPECIAL_TOKENS_MAP_FILENAME, TOKENIZER_CONFIG_FILENAME):
        path = os.path.join(directory, filename)
        if not os.path.isfile(path):
            continue
        value = read_json_file(path, "a JSON object of tokenizer options")
        if not isinstance(value, dict):
            raise ValueError(
                f"'{path}' holds a JSON {type(value).__name__}, not an object of tokenizer "
                "options: the file is damaged or was written by something else."
            )
        for key, item in value.items():
            if key == "added_tokens_decoder" and isinstance(item, dict):
                for index, token in item.items():
                    # Only the special ones: plain added tokens are not replicated.
                    special = isinstance(token, dict) and token.get("special", False)
                    content = token_content(token)
                    if special and content is not None and str(index).isdigit():
                        added[content] = int(index)
            elif key in _SPECIAL_TOKEN_KEYS:
                options[key] = token_content(item)
            elif key in ("additional_special_tokens", "extra_special_tokens"):
                tokens = item.values() if isinstance(item, dict) else item
                tokens = [token_content(token) for token in tokens or ()]
                options["additional_special_tokens"] = [t for t in tokens if t is not None]
            else:
                options[key] = item
    options["added_tokens"] = added
    config_path = os.path.join(directory, MODEL_CONFIG_FILENAME)
    config = read_json_file(config_path, "a model config") if os.path.isfile(config_path) else {}
    options["model_config"] = config if isinstance(config, dict) else {}
    return options


def added_token_pattern(tokens):
    """A regex that finds `tokens` leftmost-longest (as transformers' Trie / AddedVocabulary)."""
    tokens = sorted({token for token in tokens if token}, key=lambda token: (-len(token), token))
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def split_added_tokens(text, pattern):
    """Yields `(segment, is_added_token)` pairs covering `text`, empty segments left out."""
    if pattern is None:
        if text:
            yield text, False
        return
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            yield text[start : match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def check_special_tokens(vocabulary, names, class_name):
    """`{argument name: id}` of the special tokens; `ValueError` for one not in the vocabulary."""
    ids = {}
    for name, token in names.items():
        if not isinstance(token, str) or not token:
            raise ValueError(f"`{name}` must be a non-empty str. Received: {name}={token!r}")
        if token not in vocabulary:
            raise ValueError(
                f"`{name}={token!r}` is not in the vocabulary of this {class_name}. Pass the "
                f"token the vocabulary uses, e.g. `{name}=...` as its tokenizer_config.json says."
            )
        ids[name] = vocabulary[token]
    return ids


def check_vocabulary_mapping(vocabulary, argument, filename):
    """Returns `vocabulary` as a `{str: int}` dict; `ValueError` for anything else."""
    if not isinstance(vocabulary, dict) or not vocabulary:
        raise ValueError(
            f"`{argument}` must be a non-empty dict of token (str) to id (int), as in "
            f"{filename}. Received: {type(vocabulary).__name__}."
        )
    checked = {}
    for token, index in vocabulary.items():
        if not isinstance(token, str) or not is_int(index) or index < 0:
            raise ValueError(
                f"`{argument}` must map str tokens to non-negative int ids, as {filename} "
                f"does. Received the entry {token!r}: {index!r}."
            )
        checked[token] = int(index)
    return checked


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

    Subclasses set `_pad_id`, `_unk_id`, `_start_id`, `_end_id`, `_vocabulary_size`,
    `_pieces` (token of each id, "" where no token has it) and `_skipped_ids` (the
    special ids transformers' `decode(..., skip_special_tokens=True)` drops), and
    define `_encode_text(text)`, `_decode_ids(ids)`, `_with_special_ids(ids)`,
    `save_huggingface(directory)` and `from_huggingface(directory)`.
    """

    @property
    def vocabulary_size(self):
        """Number of ids: the largest id + 1."""
        return self._vocabulary_size

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
        text = self.detokenize(ids).numpy()
        if isinstance(text, bytes):
            return text.decode("utf-8")
        return [item.decode("utf-8") for item in text]

    def id_to_piece(self, ids):
        """Returns the tokens (`tf.string`) of int `ids`; "" for an id no token has.

        Args:
            ids: an int or int ids of any shape (a list, NumPy array or tensor).

        Returns:
            A `tf.string` tensor of the shape of `ids`.
        """
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.id_to_piece, ids)
        if getattr(self, "_pieces_tensor", None) is None:
            self._pieces_tensor = tf.constant(self._pieces, dtype=tf.string)
        ids = tf.convert_to_tensor(ids, dtype=tf.int32)
        valid = (ids >= 0) & (ids < len(self._pieces))
        pieces = tf.gather(self._pieces_tensor, tf.clip_by_value(ids, 0, len(self._pieces) - 1))
        return tf.where(valid, pieces, tf.constant("", dtype=tf.string))

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


# ---------------------------------------------------------------------------------------
# BERT's normalisation and pre-tokenisation, as the `tokenizers` library (which backs
# transformers 5's `BertTokenizer`) does them: `BertNormalizer`, `BertPreTokenizer`.

# Unicode White_Space characters that are not control characters: BERT turns them into " "
# (the control ones, U+0009-U+000D and U+0085, are dropped, except tab, newline and return).
_WHITESPACE = frozenset(
    "\t\n\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(map(chr, range(0x2000, 0x200B)))
)
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_CACHE_SIZE = 100_000  # words whose ids are remembered
_MAX_INPUT_CHARS_PER_WORD = 100  # longer words are [UNK], as in BERT
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _is_cjk(code_point):
    return any(low <= code_point <= high for low, high in _CJK_RANGES)


def _is_punctuation(character):
    return character in _ASCII_PUNCTUATION or unicodedata.category(character).startswith("P")


class WordPieceTokenizer(HuggingFacePythonTokenizer):
    """BERT's WordPiece tokenizer, giving the ids of transformers' `BertTokenizer`.

    It reads a Hugging Face BERT folder (`vocab.txt`, or `tokenizer.json` alone as
    transformers 5 saves it, with the options of `tokenizer_config.json`) and
    reproduces the tokenizer transformers builds from it: BERT's text cleaning
    (control characters, U+0000 and U+FFFD dropped, every Unicode space made a
    space), spaces around CJK ideographs, NFD accent stripping and lower-casing,
    splitting on whitespace and on punctuation (Unicode `P*` and every ASCII
    symbol, `$`, `^` and `` ` `` included), then greedy longest-match WordPiece
    with `##` continuations, `[UNK]` for a word it cannot spell or longer than
    100 characters. Special tokens written in the text (`"[MASK]"`) are kept whole.

    It follows transformers 5, whose `BertTokenizer` is the `tokenizers` (Rust)
    one: unlike transformers 4's Python `BertTokenizer` (now
    `BertTokenizerLegacy`), the text is not NFC-normalised first, so a
    decomposed accent in cased text gives `[UNK]` as it does there; lower-casing
    is character by character (no final-sigma rule), as the Rust code does.
    `decode` follows its `decode(ids, skip_special_tokens=True)` too: `##` joins,
    and no space before `.`, `,`, `!` or `?`.

    Tokenizing runs in Python (`tokenize` also works in `tf.data` through
    `tf.py_function`, but cannot be exported in a SavedModel).
    `start_id` is `[CLS]`, `end_id` `[SEP]`, `pad_id` `[PAD]`, `mask_id` `[MASK]`.

    Args:
        vocabulary: list of str (the lines of `vocab.txt`, id = line number) or a
            dict of token to id.
        lowercase: bool, lower-case the text (`do_lower_case`). Defaults to `True`.
        strip_accents: bool or `None`, remove accents; `None` follows `lowercase`,
            as BERT. Defaults to `None`.
        tokenize_chinese_chars: bool, split CJK ideographs into one token each.
            Defaults to `True`.
        unk_token: str. Defaults to `"[UNK]"`.
        sep_token: str, the end token. Defaults to `"[SEP]"`.
        pad_token: str. Defaults to `"[PAD]"`.
        cls_token: str, the start token. Defaults to `"[CLS]"`.
        mask_token: str or `None`; `None` (or a token missing from the vocabulary)
            gives `mask_id=None`. Defaults to `"[MASK]"`.
        additional_special_tokens: list of str, more tokens kept whole when written
            in the text and dropped by `decode`. Defaults to `None`.

    Example:

    >>> import os, tempfile
    >>> from keras_transformer.text import WordPieceTokenizer
    >>> directory = tempfile.mkdtemp()
    >>> words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "run", "##s", "!"]
    >>> with open(os.path.join(directory, "vocab.txt"), "w") as file:
    ...     _ = file.write("\\n".join(words) + "\\n")
    >>> tokenizer = WordPieceTokenizer.from_huggingface(directory)
    >>> tokenizer.encode(["The dog runs!"])  # [CLS] ... [SEP], as transformers
    [[2, 5, 6, 7, 8, 9, 3]]
    >>> tokenizer.tokenize("The dog runs!").numpy().tolist()
    [5, 6, 7, 8, 9]
    >>> tokenizer.decode([2, 5, 6, 7, 8, 9, 3, 0])
    'the dog runs!'

    References:
        - [Devlin et al., 2019](https://arxiv.org/abs/1810.04805), "BERT: Pre-training
          of Deep Bidirectional Transformers for Language Understanding".
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), "Google's Neural Machine
          Translation System" (WordPiece).
        - Hugging Face `tokenizers`: `BertNormalizer`, `BertPreTokenizer`, `WordPiece`.

    Raises:
        ValueError: for a bad vocabulary or option, or a special token missing
            from the vocabulary.
    """

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        tokenize_chinese_chars=True,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        additional_special_tokens=None,
    ):
        if isinstance(vocabulary, (list, tuple)):
            if not vocabulary or not all(isinstance(token, str) for token in vocabulary):
                raise ValueError(
                    "`vocabulary` must be a non-empty list of str (the lines of vocab.txt) or a "
                    "dict of token to id."
                )
            lines = list(vocabulary)
            # A token listed twice takes its last line, as transformers' `load_vocab`.
            vocabulary = {token: index for index, token in enumerate(lines)}
        else:
            vocabulary = check_vocabulary_mapping(vocabulary, "vocabulary", VOCABULARY_FILENAME)
            lines = _lines_of(vocabulary, "`vocabulary`")
        for name, value in (
            ("lowercase", lowercase),
            ("tokenize_chinese_chars", tokenize_chinese_chars),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"`{name}` must be a bool. Received: {name}={value!r}")
        if strip_accents is not None and not isinstance(strip_accents, bool):
            raise ValueError(
                f"`strip_accents` must be a bool or None. Received: strip_accents={strip_accents!r}"
            )
        ids = check_special_tokens(
            vocabulary,
            {
                "unk_token": unk_token,
                "sep_token": sep_token,
                "pad_token": pad_token,
                "cls_token": cls_token,
            },
            "WordPieceTokenizer",
        )
        additional_special_tokens = list(additional_special_tokens or ())
        check_special_tokens(
            vocabulary,
            {f"additional_special_tokens[{i}]": t for i, t in enumerate(additional_special_tokens)},
            "WordPieceTokenizer",
        )
        self._lines = lines
        self._vocabulary = vocabulary
        self._lowercase = lowercase
        self._strip_accents = lowercase if strip_accents is None else strip_accents
        self._strip_accents_option = strip_accents
        self._tokenize_chinese_chars = tokenize_chinese_chars
        self._tokens = {
            "unk_token": unk_token,
            "sep_token": sep_token,
            "pad_token": pad_token,
            "cls_token": cls_token,
            "mask_token": mask_token if mask_token in vocabulary else None,
        }
        self._additional_special_tokens = additional_special_tokens
        self._unk_id = ids["unk_token"]
        self._end_id = ids["sep_token"]
        self._pad_id = ids["pad_token"]
        self._start_id = ids["cls_token"]
        self._mask_id = vocabulary.get(mask_token) if isinstance(mask_token, str) else None
        specials = [token for token in self._tokens.values() if token] + additional_special_tokens
        self._special_pattern = added_token_pattern(specials)
        self._skipped_ids = frozenset(vocabulary[token] for token in specials)
        self._vocabulary_size = len(lines)
        self._pieces = [""] * len(lines)
        for token, index in vocabulary.items():
            self._pieces[index] = token
        self._word_cache = {}
        self._pieces_tensor = None

    @property
    def mask_id(self):
        """The id of `[MASK]`, or `None` when the vocabulary has none."""
        return self._mask_id

    @property
    def lowercase(self):
        """Whether the text is lower-cased (`do_lower_case`)."""
        return self._lowercase

    @classmethod
    def from_huggingface(cls, directory):
        """Reads a Hugging Face BERT tokenizer folder.

        Reads `vocab.txt` (or, when it is missing, the WordPiece vocabulary of
        `tokenizer.json`, which is all transformers 5 saves), and the options of
        `tokenizer_config.json` / `special_tokens_map.json` when present:
        `do_lower_case` (default `True`, as transformers), `strip_accents`,
        `tokenize_chinese_chars` and the special tokens.

        Args:
            directory: str or path, a checkpoint folder such as `bert-base-uncased`'s.

        Returns:
            A `WordPieceTokenizer`.

        Raises:
            ValueError: naming `vocab.txt` when neither it nor a WordPiece
                `tokenizer.json` is in `directory`, or a file that is not valid.

        Example:

        >>> import os, tempfile
        >>> directory = tempfile.mkdtemp()
        >>> with open(os.path.join(directory, "vocab.txt"), "w") as file:
        ...     _ = file.write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\nHello\\n")
        >>> with open(os.path.join(directory, "tokenizer_config.json"), "w") as file:
        ...     _ = file.write('{"do_lower_case": false}')
        >>> WordPieceTokenizer.from_huggingface(directory).encode("Hello hello")
        [2, 4, 1, 3]
        """
        directory = os.fspath(directory)
        options = read_tokenizer_options(directory)
        path = os.path.join(directory, VOCABULARY_FILENAME)
        json_path = os.path.join(directory, TOKENIZER_JSON_FILENAME)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                vocabulary = [line.rstrip("\n") for line in file]
        elif os.path.isfile(json_path):
            tokenizer = read_json_file(json_path, "a tokenizers Tokenizer")
            model = tokenizer.get("model") if isinstance(tokenizer, dict) else None
            model = model if isinstance(model, dict) else {}
            if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
                raise ValueError(
                    f"'{VOCABULARY_FILENAME}' is missing from '{directory}' and its "
                    f"'{TOKENIZER_JSON_FILENAME}' is not a WordPiece tokenizer (model type "
                    f"{model.get('type')!r}): this is not a BERT tokenizer folder."
                )
            vocabulary = check_vocabulary_mapping(
                model["vocab"], f"The vocabulary of '{json_path}'", TOKENIZER_JSON_FILENAME
            )
            vocabulary = _lines_of(vocabulary, f"The vocabulary of '{json_path}'")
        else:
            require_file(
                directory,
                VOCABULARY_FILENAME,
                "WordPieceTokenizer",
                "Pass a BERT checkpoint folder (it holds vocab.txt or tokenizer.json).",
            )
        if not vocabulary:
            raise ValueError(f"'{path}' is empty; it should list one WordPiece token per line.")
        defaults = {
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        }
        tokens = {name: options.get(name) or default for name, default in defaults.items()}
        extra = list(options.get("additional_special_tokens") or ())
        extra += [token for token in options["added_tokens"] if token not in tokens.values()]
        extra = [token for token in dict.fromkeys(extra) if token not in tokens.values()]
        # Special tokens missing from vocab.txt get the next ids, as transformers adds them.
        present = set(vocabulary)
        for token, index in sorted(options["added_tokens"].items(), key=lambda item: item[1]):
            if token not in present and index == len(vocabulary):
                vocabulary.append(token)
                present.add(token)
        for token in [*tokens.values(), *extra]:
            if token not in present:
                vocabulary.append(token)
                present.add(token)
        return cls(
            vocabulary,
            lowercase=bool(options.get("do_lower_case", True)),
            strip_accents=options.get("strip_accents"),
            tokenize_chinese_chars=bool(options.get("tokenize_chinese_chars", True)),
            additional_special_tokens=extra,
            **tokens,
        )

    def save_huggingface(self, directory):
        """Writes `vocab.txt` and `tokenizer_config.json` for transformers' `BertTokenizer`.

        `transformers.AutoTokenizer.from_pretrained(directory)` then gives the ids
        this tokenizer gives.

        Args:
            directory: str or path, folder to write into; created if missing.

        Example:

        >>> import os, tempfile
        >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
        >>> directory = tempfile.mkdtemp()
        >>> tokenizer.save_huggingface(directory)
        >>> sorted(os.listdir(directory))
        ['tokenizer_config.json', 'vocab.txt']
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, VOCABULARY_FILENAME), "w", encoding="utf-8") as file:
            file.writelines(token + "\n" for token in self._lines)
        config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self._lowercase,
            "strip_accents": self._strip_accents_option,
            "tokenize_chinese_chars": self._tokenize_chinese_chars,
            **{name: token for name, token in self._tokens.items() if token is not None},
        }
        if self._additional_special_tokens:
            config["additional_special_tokens"] = list(self._additional_special_tokens)
        write_json_file(os.path.join(directory, TOKENIZER_CONFIG_FILENAME), config)

    def _normalize(self, text):
        characters = []
        for character in text:
            code_point = ord(character)
            if character in _WHITESPACE:
                characters.append(" ")
            elif code_point == 0 or code_point == 0xFFFD:
                continue
            elif unicodedata.category(character).startswith("C"):
                continue
            elif self._tokenize_chinese_chars and code_point >= 0x3400 and _is_cjk(code_point):
                characters += (" ", character, " ")
            else:
                characters.append(character)
        text = "".join(characters)
        if self._strip_accents:
            text = "".join(
                c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
            )
        if self._lowercase:
            text = "".join(character.lower() for character in text)
        return text

    def _words(self, text):
        for chunk in text.split(" "):
            start = 0
            for position, character in enumerate(chunk):
                if _is_punctuation(character):
                    if position > start:
                        yield chunk[start:position]
                    yield character
                    start = position + 1
            if start < len(chunk):
                yield chunk[start:]

    def _word_ids(self, word):
        """Greedy longest-match WordPiece ids of one word (`[UNK]` alone when it fails)."""
        ids = self._word_cache.get(word)
        if ids is not None:
            return ids
        ids = []
        start = 0
        if len(word) > _MAX_INPUT_CHARS_PER_WORD:
            ids = [self._unk_id]
            start = len(word)
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self._vocabulary.get(piece)
                if found is not None:
                    break
                end -= 1
            else:
                ids = [self._unk_id]
                break
            ids.append(found)
            start = end
        if len(self._word_cache) >= _CACHE_SIZE:
            self._word_cache.clear()
        self._word_cache[word] = ids
        return ids

    def _encode_text(self, text):
        ids = []
        for segment, is_special in split_added_tokens(text, self._special_pattern):
            if is_special:
                ids.append(self._vocabulary[segment])
                continue
            for word in self._words(self._normalize(segment)):
                ids += self._word_ids(word)
        return ids

    def _with_special_ids(self, ids):
        return [self._start_id, *ids, self._end_id]

    def _decode_ids(self, ids):
        parts = []
        for position, index in enumerate(ids):
            token = self._pieces[index] if 0 <= index < len(self._pieces) else ""
            if position:
                token = token[2:] if token.startswith("##") else " " + token
            parts.append(_cleanup(token))
        return "".join(parts)


def _lines_of(vocabulary, what):
    """The lines of a vocab.txt giving `vocabulary`'s ids ("" for an id no token has)."""
    lines = [""] * (max(vocabulary.values()) + 1)
    for token, index in vocabulary.items():
        if lines[index]:
            raise ValueError(
                f"{what} gives id {index} to two tokens, {lines[index]!r} and {token!r}: each "
                "id must have one token."
            )
        lines[index] = token
    return lines


def _cleanup(token):
    """The `tokenizers` WordPiece decoder's clean-up, applied to each token."""
    for before, after in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" do not", " don't"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        token = token.replace(before, after)
    return token
