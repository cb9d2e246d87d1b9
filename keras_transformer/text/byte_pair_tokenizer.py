"""GPT-2's byte-level BPE tokenizer, read from and written to Hugging Face folders."""

import os

from keras_transformer.text import tokenizer_files
from keras_transformer.text.python_tokenizer import HuggingFacePythonTokenizer

VOCABULARY_FILENAME = "vocab.json"
MERGES_FILENAME = "merges.txt"
END_OF_TEXT = "<|endoftext|>"
# GPT-2's pre-tokenisation: contractions, letters, digits, other symbols, each with one
# leading space, and runs of whitespace (the last one left to the next word).
PRETOKENIZE_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def bytes_to_unicode():
    """GPT-2's map of the 256 byte values to printable characters (`Ġ` for the space).

    Returns:
        A dict of int (0-255) to a one-character str.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    characters = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return {byte: chr(character) for byte, character in zip(printable, characters)}


def _parse_merges(lines, source):
    merges = []
    for number, line in enumerate(lines, start=1):
        if isinstance(line, (list, tuple)):
            pair = tuple(line)
        else:
            line = line.rstrip("\r\n")
            if not line or line.startswith("#version"):
                continue
            pair = tuple(line.split(" "))
        if len(pair) != 2 or not all(isinstance(part, str) and part for part in pair):
            raise ValueError(
                f"Merge {number} of {source} must be two tokens separated by one space "
                f"(e.g. 'Ġ t'). Received: {line!r}"
            )
        merges.append(pair)
    return merges


class BytePairTokenizer(HuggingFacePythonTokenizer):
    """GPT-2's byte-level BPE tokenizer, giving the ids of transformers' `GPT2Tokenizer`.

    It reads a Hugging Face GPT-2 folder (`vocab.json` and `merges.txt`, or
    `tokenizer.json` alone as transformers 5 saves it) and reproduces the
    tokenizer transformers builds from it: special tokens written in the text
    (`"<|endoftext|>"`) are kept whole; the rest is split by GPT-2's regular
    expression (contractions, ` ?` + letters, ` ?` + digits, ` ?` + other
    symbols, whitespace), each piece is spelled in GPT-2's printable byte
    alphabet (`Ġ` is the space) and merged pair by pair, lowest merge rank first.
    [`decode`][keras_transformer.text.BytePairTokenizer.decode] maps the
    characters back to bytes and decodes UTF-8, invalid bytes as U+FFFD, as
    transformers' `decode(ids, skip_special_tokens=True)`.

    GPT-2 has no padding, start or unknown token: `pad_id`, `start_id`, `end_id`
    and `unk_id` are all the id of `<|endoftext|>` (unless `pad_token` names
    another), so
    [`detokenize`][keras_transformer.text.BytePairTokenizer.detokenize] stops at
    the first of them.
    [`tokenize`][keras_transformer.text.BytePairTokenizer.tokenize] adds none,
    and neither does
    [`encode`][keras_transformer.text.BytePairTokenizer.encode], as
    transformers. A byte symbol missing from the vocabulary is dropped, as the
    `tokenizers` BPE model does without an unknown token.

    Tokenizing runs in Python (`tokenize` also works in `tf.data` through
    `tf.py_function`, but cannot be exported in a SavedModel). The regular
    expression needs the `regex` package (a dependency of keras-hub and
    transformers).

    Args:
        vocabulary: dict of token (str, in the byte alphabet) to id, `vocab.json`.
        merges: list of `(left, right)` token pairs, or of `"left right"` lines as in
            `merges.txt`, highest priority first.
        add_prefix_space: bool, put a space before text that does not start with
            one, so that the first word is split like the others. Defaults to `False`.
        eos_token: str, the end-of-text token. Defaults to `"<|endoftext|>"`.
        bos_token: str, the start token. Defaults to `"<|endoftext|>"`.
        unk_token: str, the unknown token. Defaults to `"<|endoftext|>"`.
        pad_token: str or `None`, the padding token. Defaults to `None` (`eos_token`).
        additional_special_tokens: list of str, more tokens kept whole when written
            in the text and dropped by `decode`. Defaults to `None`.

    Example:

    >>> import json, os, tempfile
    >>> from keras_transformer.text import BytePairTokenizer
    >>> directory = tempfile.mkdtemp()
    >>> alphabet = sorted(BytePairTokenizer.byte_alphabet())
    >>> merges = ["h e", "l l", "he ll", "hell o", "Ġ w"]
    >>> tokens = alphabet + ["he", "ll", "hell", "hello", "Ġw", "<|endoftext|>"]
    >>> with open(os.path.join(directory, "vocab.json"), "w") as file:
    ...     json.dump({token: i for i, token in enumerate(tokens)}, file)
    >>> with open(os.path.join(directory, "merges.txt"), "w") as file:
    ...     _ = file.write("#version: 0.2\\n" + "\\n".join(merges) + "\\n")
    >>> tokenizer = BytePairTokenizer.from_huggingface(directory)
    >>> tokenizer.id_to_piece(tokenizer.tokenize("hello wow")).numpy().tolist()
    [b'hello', b'\\xc4\\xa0w', b'o', b'w']
    >>> tokenizer.decode(tokenizer.tokenize("hello wow"))
    'hello wow'
    >>> tokenizer.end_id == tokenizer.pad_id == tokenizer.start_id == 261
    True

    References:
        - [Radford et al., 2019](https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf),
          "Language Models are Unsupervised Multitask Learners" (GPT-2).
        - [Sennrich et al., 2016](https://arxiv.org/abs/1508.07909), "Neural Machine
          Translation of Rare Words with Subword Units" (BPE).
        - Hugging Face `tokenizers`: `ByteLevel` pre-tokenizer and decoder, `BPE`.

    Raises:
        ValueError: for a bad vocabulary, merge or option, or a special token
            missing from the vocabulary.
    """

    def __init__(
        self,
        vocabulary,
        merges,
        add_prefix_space=False,
        eos_token=END_OF_TEXT,
        bos_token=END_OF_TEXT,
        unk_token=END_OF_TEXT,
        pad_token=None,
        additional_special_tokens=None,
    ):
        try:
            import regex
        except ImportError as error:  # pragma: no cover - installed with keras-hub
            raise ImportError(
                "BytePairTokenizer needs the `regex` package for GPT-2's pre-tokenisation "
                "(\\p{L}, \\p{N}): `pip install regex`."
            ) from error
        vocabulary = tokenizer_files.check_vocabulary_mapping(
            vocabulary, "vocabulary", VOCABULARY_FILENAME
        )
        if isinstance(merges, str) or not isinstance(merges, (list, tuple)):
            raise ValueError(
                "`merges` must be a list of (left, right) pairs or of 'left right' lines. "
                f"Received: {type(merges).__name__}."
            )
        merges = _parse_merges(merges, "`merges`")
        for left, right in merges:
            for token in (left, right, left + right):
                if token not in vocabulary:
                    raise ValueError(
                        f"The merge '{left} {right}' uses {token!r}, which is not in the "
                        "vocabulary: `vocabulary` and `merges` belong to different tokenizers."
                    )
        if not isinstance(add_prefix_space, bool):
            raise ValueError(
                "`add_prefix_space` must be a bool. "
                f"Received: add_prefix_space={add_prefix_space!r}"
            )
        names = {"eos_token": eos_token, "bos_token": bos_token, "unk_token": unk_token}
        if pad_token is not None:
            names["pad_token"] = pad_token
        ids = tokenizer_files.check_special_tokens(vocabulary, names, "BytePairTokenizer")
        super().__init__(
            vocabulary,
            max(vocabulary.values()) + 1,
            {**names, "pad_token": pad_token},
            additional_special_tokens,
        )
        self._merges = merges
        # A pair listed twice takes its last rank, as the `tokenizers` BPE model.
        self._ranks = {pair: rank for rank, pair in enumerate(merges)}
        self._add_prefix_space = add_prefix_space
        self._end_id = ids["eos_token"]
        self._start_id = ids["bos_token"]
        self._unk_id = ids["unk_token"]
        self._pad_id = ids.get("pad_token", self._end_id)
        self._byte_encoder = bytes_to_unicode()
        self._byte_decoder = {character: byte for byte, character in self._byte_encoder.items()}
        self._pretokenize = regex.compile(PRETOKENIZE_PATTERN).findall

    @staticmethod
    def byte_alphabet():
        """The 256 characters that spell bytes in GPT-2's vocabulary (`Ġ` is the space).

        Returns:
            A set of 256 one-character str.

        Example:

        >>> alphabet = BytePairTokenizer.byte_alphabet()
        >>> len(alphabet), "Ġ" in alphabet, " " in alphabet
        (256, True, False)
        """
        return set(bytes_to_unicode().values())

    @property
    def merges(self):
        """The merges, a list of `(left, right)` token pairs, highest priority first."""
        return list(self._merges)

    @property
    def add_prefix_space(self):
        """Whether a space is put before text that does not start with one."""
        return self._add_prefix_space

    @classmethod
    def from_huggingface(cls, directory):
        """Reads a Hugging Face GPT-2 tokenizer folder.

        Reads `vocab.json` and `merges.txt` (or, when they are missing, the BPE
        model of `tokenizer.json`), and the options of `tokenizer_config.json` /
        `special_tokens_map.json` when present: `add_prefix_space` and the
        special tokens.

        Args:
            directory: str or path, a checkpoint folder such as `gpt2`'s.

        Returns:
            A `BytePairTokenizer`.

        Raises:
            ValueError: naming `vocab.json` or `merges.txt` when one is missing
                (and there is no BPE `tokenizer.json`), or a file that is not valid.

        Example:

        >>> import tempfile
        >>> BytePairTokenizer.from_huggingface(tempfile.mkdtemp())
        Traceback (most recent call last):
            ...
        ValueError: 'vocab.json' is missing from '...': ...
        """
        directory = os.fspath(directory)
        options = tokenizer_files.read_tokenizer_options(directory)
        vocabulary_path = os.path.join(directory, VOCABULARY_FILENAME)
        merges_path = os.path.join(directory, MERGES_FILENAME)
        json_path = os.path.join(directory, tokenizer_files.TOKENIZER_JSON_FILENAME)
        have_files = os.path.isfile(vocabulary_path) and os.path.isfile(merges_path)
        if not have_files and os.path.isfile(json_path):
            model = tokenizer_files.tokenizer_json_model(
                directory, "BPE", [VOCABULARY_FILENAME, MERGES_FILENAME], "GPT-2"
            )
            vocabulary, merges = model.get("vocab"), model.get("merges") or []
            merges = _parse_merges(merges, f"'{json_path}'")
            source = f"the vocabulary of '{json_path}'"
        else:
            for filename in (VOCABULARY_FILENAME, MERGES_FILENAME):
                tokenizer_files.require_file(
                    directory,
                    filename,
                    "BytePairTokenizer",
                    "Pass a GPT-2 checkpoint folder (vocab.json and merges.txt, or "
                    "tokenizer.json).",
                )
            vocabulary = tokenizer_files.read_json_file(
                vocabulary_path, "a JSON object of token to id"
            )
            with open(merges_path, encoding="utf-8") as file:
                merges = _parse_merges(file.read().split("\n"), f"'{merges_path}'")
            source = f"'{vocabulary_path}'"
        vocabulary = dict(
            tokenizer_files.check_vocabulary_mapping(vocabulary, source, VOCABULARY_FILENAME)
        )
        for token, index in options["added_tokens"].items():
            vocabulary.setdefault(token, index)
        tokens = {
            name: options.get(name) or END_OF_TEXT
            for name in ("eos_token", "bos_token", "unk_token")
        }
        tokens["pad_token"] = options.get("pad_token")
        extra = tokenizer_files.extra_special_tokens(options, set(tokens.values()))
        # Special tokens missing from vocab.json get the next ids, as transformers adds them.
        for token in [*tokens.values(), *extra]:
            if token is not None and token not in vocabulary:
                vocabulary[token] = max(vocabulary.values()) + 1
        return cls(
            vocabulary,
            merges,
            add_prefix_space=bool(options.get("add_prefix_space", False)),
            additional_special_tokens=extra,
            **tokens,
        )

    def _write_vocabulary(self, directory):
        tokenizer_files.write_json_file(
            os.path.join(directory, VOCABULARY_FILENAME), self._vocabulary
        )
        with open(os.path.join(directory, MERGES_FILENAME), "w", encoding="utf-8") as file:
            file.write("#version: 0.2\n")
            file.writelines(f"{left} {right}\n" for left, right in self._merges)

    def _tokenizer_config(self):
        return {
            "tokenizer_class": "GPT2Tokenizer",
            "add_prefix_space": self._add_prefix_space,
            "errors": "replace",
            **self._tokens,
        }

    def _split_word(self, word):
        """The BPE ids of one pre-tokenised piece (a str of the byte alphabet)."""
        # Symbols missing from the vocabulary are dropped before merging, as `tokenizers` does.
        symbols = [character for character in word if character in self._vocabulary]
        ranks = self._ranks
        while len(symbols) > 1:
            best = min(zip(symbols, symbols[1:]), key=lambda pair: ranks.get(pair, len(ranks)))
            if best not in ranks:
                break
            merged = []
            position = 0
            while position < len(symbols):
                if (
                    position < len(symbols) - 1
                    and symbols[position] == best[0]
                    and symbols[position + 1] == best[1]
                ):
                    merged.append(best[0] + best[1])
                    position += 2
                else:
                    merged.append(symbols[position])
                    position += 1
            symbols = merged
        return [self._vocabulary[symbol] for symbol in symbols]

    def _words(self, segment):
        """GPT-2's pre-tokenised pieces of `segment`, spelled in the byte alphabet."""
        if self._add_prefix_space and not segment.startswith(" "):
            segment = " " + segment
        for piece in self._pretokenize(segment):
            yield "".join(self._byte_encoder[byte] for byte in piece.encode("utf-8"))

    def _with_special_ids(self, ids):
        return list(ids)

    def _decode_ids(self, ids):
        data = bytearray()
        for index in ids:
            token = self._pieces[index] if 0 <= index < len(self._pieces) else ""
            if all(character in self._byte_decoder for character in token):
                data += bytes(self._byte_decoder[character] for character in token)
            else:
                data += token.encode("utf-8")
        return data.decode("utf-8", errors="replace")
