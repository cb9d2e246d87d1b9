"""BERT's WordPiece tokenizer, read from and written to Hugging Face `vocab.txt` folders."""

import os
import unicodedata

from keras_transformer.text import tokenizer_files
from keras_transformer.text.python_tokenizer import HuggingFacePythonTokenizer

VOCABULARY_FILENAME = "vocab.txt"

# ---------------------------------------------------------------------------------------
# BERT's normalisation and pre-tokenisation, as the `tokenizers` library (which backs
# transformers 5's `BertTokenizer`) does them: `BertNormalizer`, `BertPreTokenizer`.

# Unicode White_Space characters that are not control characters: BERT turns them into " "
# (the control ones, U+0009-U+000D and U+0085, are dropped, except tab, newline and return).
WHITESPACE = frozenset(
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
MAX_INPUT_CHARS_PER_WORD = 100  # longer words are [UNK], as in BERT
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def is_cjk(code_point):
    """Whether BERT puts spaces around the code point (a CJK ideograph)."""
    return any(low <= code_point <= high for low, high in _CJK_RANGES)


def is_punctuation(character):
    """Whether BERT makes the character a word of its own (Unicode `P*`, any ASCII symbol)."""
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
    [`decode`][keras_transformer.text.WordPieceTokenizer.decode] follows its
    `decode(ids, skip_special_tokens=True)` too: `##` joins, and no space before
    `.`, `,`, `!` or `?`.

    Tokenizing runs in Python
    ([`tokenize`][keras_transformer.text.WordPieceTokenizer.tokenize] also works
    in `tf.data` through `tf.py_function`, but cannot be exported in a
    SavedModel). `start_id` is `[CLS]`, `end_id` `[SEP]`, `pad_id` `[PAD]`,
    `mask_id` `[MASK]`.

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
            vocabulary = tokenizer_files.check_vocabulary_mapping(
                vocabulary, "vocabulary", VOCABULARY_FILENAME
            )
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
        ids = tokenizer_files.check_special_tokens(
            vocabulary,
            {
                "unk_token": unk_token,
                "sep_token": sep_token,
                "pad_token": pad_token,
                "cls_token": cls_token,
            },
            "WordPieceTokenizer",
        )
        tokens = {
            "unk_token": unk_token,
            "sep_token": sep_token,
            "pad_token": pad_token,
            "cls_token": cls_token,
            "mask_token": mask_token if mask_token in vocabulary else None,
        }
        super().__init__(vocabulary, len(lines), tokens, additional_special_tokens)
        self._lines = lines
        self._lowercase = lowercase
        self._strip_accents = lowercase if strip_accents is None else strip_accents
        self._strip_accents_option = strip_accents
        self._tokenize_chinese_chars = tokenize_chinese_chars
        self._unk_id = ids["unk_token"]
        self._end_id = ids["sep_token"]
        self._pad_id = ids["pad_token"]
        self._start_id = ids["cls_token"]
        self._mask_id = vocabulary.get(mask_token) if isinstance(mask_token, str) else None

    @property
    def mask_id(self):
        """The id of `[MASK]`, or `None` when the vocabulary has none."""
        return self._mask_id

    @property
    def lowercase(self):
        """Whether the text is lower-cased (`do_lower_case`)."""
        return self._lowercase

    @property
    def strip_accents(self):
        """Whether accents are stripped (`strip_accents`, or else `lowercase`)."""
        return self._strip_accents

    @property
    def tokenize_chinese_chars(self):
        """Whether each CJK ideograph is a word of its own."""
        return self._tokenize_chinese_chars

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
        options = tokenizer_files.read_tokenizer_options(directory)
        path = os.path.join(directory, VOCABULARY_FILENAME)
        json_path = os.path.join(directory, tokenizer_files.TOKENIZER_JSON_FILENAME)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                vocabulary = [line.rstrip("\n") for line in file]
        elif os.path.isfile(json_path):
            model = tokenizer_files.tokenizer_json_model(
                directory, "WordPiece", [VOCABULARY_FILENAME], "BERT"
            )
            vocabulary = tokenizer_files.check_vocabulary_mapping(
                model.get("vocab"),
                f"The vocabulary of '{json_path}'",
                tokenizer_files.TOKENIZER_JSON_FILENAME,
            )
            vocabulary = _lines_of(vocabulary, f"The vocabulary of '{json_path}'")
        else:
            tokenizer_files.require_file(
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
        extra = tokenizer_files.extra_special_tokens(options, set(tokens.values()))
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

    def _write_vocabulary(self, directory):
        with open(os.path.join(directory, VOCABULARY_FILENAME), "w", encoding="utf-8") as file:
            file.writelines(token + "\n" for token in self._lines)

    def _tokenizer_config(self):
        return {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self._lowercase,
            "strip_accents": self._strip_accents_option,
            "tokenize_chinese_chars": self._tokenize_chinese_chars,
            **{name: token for name, token in self._tokens.items() if token is not None},
        }

    def _normalize(self, text):
        characters = []
        for character in text:
            code_point = ord(character)
            if character in WHITESPACE:
                characters.append(" ")
            elif code_point == 0 or code_point == 0xFFFD:
                continue
            elif unicodedata.category(character).startswith("C"):
                continue
            elif self._tokenize_chinese_chars and code_point >= 0x3400 and is_cjk(code_point):
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

    def _words(self, segment):
        """BERT's words of `segment`: normalised, split on spaces and punctuation."""
        for chunk in self._normalize(segment).split(" "):
            start = 0
            for position, character in enumerate(chunk):
                if is_punctuation(character):
                    if position > start:
                        yield chunk[start:position]
                    yield character
                    start = position + 1
            if start < len(chunk):
                yield chunk[start:]

    def _split_word(self, word):
        """Greedy longest-match WordPiece ids of one word (`[UNK]` alone when it fails)."""
        ids = []
        start = 0
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
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
