"""MarianMT's tokenizer (Helsinki-NLP opus-mt): SentencePiece pieces looked up in vocab.json.

Tokenizing and detokenizing are TensorFlow ops (tensorflow-text's SentencePiece and
`tf.lookup` tables), so they trace into a `tf.function` and a SavedModel like
`SubwordTokenizer`'s.
"""

import os

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer import compat
from keras_transformer.text import tokenizer_files
from keras_transformer.text.python_tokenizer import ids_rank_2, python_strings

SOURCE_MODEL_FILENAME = "source.spm"
TARGET_MODEL_FILENAME = "target.spm"
VOCABULARY_FILENAME = "vocab.json"
TARGET_VOCABULARY_FILENAME = "target_vocab.json"
_SPIECE_UNDERLINE = "▁"
_CUT = b"\xff"
# What Python's `str.strip()` removes (transformers strips the decoded text with it).
_SPACE = (
    r"[\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
    r"\x{205f}\x{3000}]"
)
_STRIP_PATTERN = f"^{_SPACE}+|{_SPACE}+$"
# A language code such as ">>de<<" at the start of a text: transformers' `remove_language_code`.
_HAS_LANGUAGE_CODE = r"(?s)>>.*?<<.*"
_LANGUAGE_CODE = r"(?s)^(>>.*?<<).*$"
_AFTER_LANGUAGE_CODE = r"(?s)^>>.*?<<"


def _re2_literal(text):
    """`text` as an RE2 pattern matching it literally."""
    return "".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def _sentencepiece(model_proto, argument):
    if not isinstance(model_proto, bytes) or not model_proto:
        raise ValueError(
            f"`{argument}` must be the non-empty bytes of a SentencePiece model (the "
            f"{argument.split('_')[0]}.spm file). Received: {type(model_proto).__name__}."
        )
    try:
        tokenizer = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.string)
        # A model resource that survives `keras.backend.clear_session()`.
        compat.share_sentencepiece_resource(tokenizer, model_proto)
        tokenizer.vocab_size()
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(f"`{argument}` is not a valid SentencePiece model: {error}") from error
    return tokenizer


def _piece_surfaces(model_proto, pieces):
    """What SentencePiece's `decode_pieces` makes of each piece of a vocab.json.

    Control pieces (`<s>`, `</s>`) decode to nothing, byte pieces (`<0xE2>`) to their
    byte; anything else, pieces the model does not know included, to itself.
    """
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(model_proto)
    kinds = sentencepiece_model_pb2.ModelProto.SentencePiece
    types = {piece.piece: piece.type for piece in model.pieces}
    surfaces = []
    for piece in pieces:
        kind = types.get(piece)
        if kind == kinds.CONTROL:
            surfaces.append(b"")
        elif kind == kinds.BYTE:
            surfaces.append(bytes([int(piece[3:5], 16)]))
        else:
            surfaces.append(piece.encode("utf-8"))
    return surfaces


def _table(keys, values, key_dtype, value_dtype, default):
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, dtype=key_dtype), tf.constant(values, dtype=value_dtype)
        ),
        default_value=tf.constant(default, dtype=value_dtype),
    )


class MarianTokenizer(tf.Module):
    """MarianMT's tokenizer, giving the ids of transformers' `MarianTokenizer`.

    It reads a Helsinki-NLP opus-mt folder: the source and target SentencePiece
    models (`source.spm`, `target.spm`) and `vocab.json`, the piece-to-id map of the
    model's embeddings (its ids are not the SentencePiece ids; `target_vocab.json`
    too for models with `separate_vocabs`). A text is split into the pieces of the
    source model and each piece is looked up in `vocab.json`, `<unk>` for a piece
    missing there; [`encode`][keras_transformer.text.MarianTokenizer.encode] then
    adds `</s>`, as transformers. As transformers 5.25 does, a language code at the
    start (`">>de<< Hallo"`) becomes one token of its own (`<unk>` when `vocab.json`
    lacks it), and special tokens written in the text (`"</s>"`, `"<unk>"`,
    `"<pad>"`) are kept whole.

    Not replicated: transformers 5.25 builds a Moses punctuation normaliser when
    `sacremoses` is installed but never applies it, so nothing is lost there;
    `sp_model_kwargs` (SentencePiece sampling) is ignored; plain (non-special)
    added tokens of `tokenizer_config.json` are not kept whole. tensorflow-text's
    build of SentencePiece breaks ties between unigram segmentations of equal
    score differently from the `sentencepiece` package transformers uses: `";;;"`
    may become `";;" ";"` here and `";" ";;"` there (1 of 300 mixed test
    sentences), the same text in pieces of the same total score.

    Tokenizing and detokenizing are TensorFlow ops (tensorflow-text's SentencePiece
    and `tf.lookup` tables), so they run eagerly, in `tf.data` and inside a
    `tf.function` exported in a SavedModel (load it after `import tensorflow_text`).

    [`detokenize`][keras_transformer.text.MarianTokenizer.detokenize] decodes target
    ids as transformers' `decode(ids, skip_special_tokens=True)`: the pieces joined,
    `▁` made a space, the ends stripped; it also stops at the first `end_id`.
    `pad_id` is `<pad>`'s id (the last id in opus-mt models), `end_id` `</s>`'s,
    `unk_id` `<unk>`'s, and `start_id` is `pad_id`, since Marian's decoder starts
    from the pad token (`bos_token` sets another).

    Args:
        source_model_proto: bytes, the source SentencePiece model (`source.spm`).
        target_model_proto: bytes, the target SentencePiece model (`target.spm`).
        vocabulary: dict of piece to id (`vocab.json`).
        target_vocabulary: dict of piece to id for the target side
            (`target_vocab.json`), or `None` when both sides share `vocabulary`.
            Defaults to `None`.
        source_lang: str or `None`, kept in `tokenizer_config.json`. Defaults to `None`.
        target_lang: str or `None`, kept in `tokenizer_config.json`. Defaults to `None`.
        unk_token: str. Defaults to `"<unk>"`.
        eos_token: str, the end token. Defaults to `"</s>"`.
        pad_token: str. Defaults to `"<pad>"`.
        bos_token: str or `None`, a start token for models whose decoder does not
            start from `pad_token`. Defaults to `None`.
        additional_special_tokens: list of str, more tokens kept whole when written
            in the text and dropped by `detokenize`. Defaults to `None`.
        name: str, name of the module. Defaults to `"marian_tokenizer"`.

    Example:

    >>> import os, tempfile
    >>> from keras_transformer.text import MarianTokenizer, SubwordTokenizer
    >>> subword = SubwordTokenizer.train(["Two dogs play.", "Zwei Hunde spielen."] * 10,
    ...                                  vocabulary_size=30, byte_fallback=False)
    >>> directory = tempfile.mkdtemp()
    >>> MarianTokenizer.from_subword_tokenizer(subword).save_huggingface(directory)
    >>> sorted(os.listdir(directory))
    ['source.spm', 'target.spm', 'tokenizer_config.json', 'vocab.json']
    >>> tokenizer = MarianTokenizer.from_huggingface(directory)
    >>> ids = tokenizer.encode(["Two dogs."])  # pieces, then </s>
    >>> ids[0][-1] == tokenizer.end_id
    True
    >>> tokenizer.decode(ids)
    ['Two dogs.']

    References:
        - [Junczys-Dowmunt et al., 2018](https://arxiv.org/abs/1804.00344), "Marian:
          Fast Neural Machine Translation in C++".
        - [Tiedemann and Thottingal, 2020](https://aclanthology.org/2020.eamt-1.61/),
          "OPUS-MT – Building open translation services for the World".
        - [Kudo and Richardson, 2018](https://arxiv.org/abs/1808.06226),
          "SentencePiece".

    Raises:
        ValueError: for a model that is not SentencePiece, a bad vocabulary, or a
            special token missing from it.
    """

    def __init__(
        self,
        source_model_proto,
        target_model_proto,
        vocabulary,
        target_vocabulary=None,
        source_lang=None,
        target_lang=None,
        unk_token="<unk>",
        eos_token="</s>",
        pad_token="<pad>",
        bos_token=None,
        additional_special_tokens=None,
        name="marian_tokenizer",
    ):
        super().__init__(name=name)
        source_sentencepiece = _sentencepiece(source_model_proto, "source_model_proto")
        target_sentencepiece = _sentencepiece(target_model_proto, "target_model_proto")
        vocabulary = tokenizer_files.check_vocabulary_mapping(
            vocabulary, "vocabulary", VOCABULARY_FILENAME
        )
        separate = target_vocabulary is not None
        if separate:
            target_vocabulary = tokenizer_files.check_vocabulary_mapping(
                target_vocabulary, "target_vocabulary", TARGET_VOCABULARY_FILENAME
            )
        names = {"unk_token": unk_token, "eos_token": eos_token, "pad_token": pad_token}
        if bos_token is not None:
            names["bos_token"] = bos_token
        ids = tokenizer_files.check_special_tokens(vocabulary, names, "MarianTokenizer")
        if separate:
            tokenizer_files.check_special_tokens(
                target_vocabulary, {"unk_token": unk_token}, "MarianTokenizer"
            )
        additional_special_tokens = tokenizer_files.check_additional_special_tokens(
            vocabulary, additional_special_tokens, "MarianTokenizer"
        )
        for argument, value in (("source_lang", source_lang), ("target_lang", target_lang)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"`{argument}` must be a str or None. Received: {value!r}")

        self._source_sentencepiece = source_sentencepiece
        self._target_sentencepiece = target_sentencepiece
        self._source_model_proto = source_model_proto
        self._target_model_proto = target_model_proto
        self._config = {
            "source_lang": source_lang,
            "target_lang": target_lang,
            "unk_token": unk_token,
            "eos_token": eos_token,
            "pad_token": pad_token,
            "bos_token": bos_token,
            "additional_special_tokens": tuple(additional_special_tokens),
        }
        self._vocabulary_items = tuple(vocabulary.items())
        self._target_vocabulary_items = tuple(target_vocabulary.items()) if separate else None
        self._unk_id = ids["unk_token"]
        self._end_id = ids["eos_token"]
        self._pad_id = ids["pad_token"]
        self._start_id = ids.get("bos_token", self._pad_id)
        self._source_vocabulary_size = len(vocabulary)
        self._target_vocabulary_size = len(target_vocabulary) if separate else len(vocabulary)

        self._source_table = _table(
            list(vocabulary), list(vocabulary.values()), tf.string, tf.int32, self._unk_id
        )
        target = target_vocabulary if separate else vocabulary
        self._target_table = (
            _table(list(target), list(target.values()), tf.string, tf.int32, target[unk_token])
            if separate
            else self._source_table
        )
        specials = {token: vocabulary[token] for token in names.values()}
        specials.update({token: vocabulary[token] for token in additional_special_tokens})
        self._special_table = _table(
            list(specials), list(specials.values()), tf.string, tf.int32, -1
        )
        ordered = sorted(specials, key=lambda token: (-len(token), token))
        self._special_pattern = "|".join(map(_re2_literal, ordered))
        skipped = sorted({self._pad_id, self._start_id, self._unk_id, *specials.values()})
        self._skipped_ids = tf.constant(skipped, dtype=tf.int32)
        # Decoding: transformers decodes with the source SentencePiece model unless the
        # vocabularies are separate (its `use_source_tokenizer` default).
        decoding_proto = target_model_proto if separate else source_model_proto
        surfaces = _piece_surfaces(decoding_proto, list(target))
        self._surface_table = _table(list(target.values()), surfaces, tf.int64, tf.string, "")
        self._piece_table = _table(list(target.values()), list(target), tf.int64, tf.string, "")

    @property
    def vocabulary_size(self):
        """Number of ids: the entries of vocab.json (transformers' `vocab_size`)."""
        return self._source_vocabulary_size

    @property
    def source_vocabulary_size(self):
        """Number of source ids: the entries of vocab.json."""
        return self._source_vocabulary_size

    @property
    def target_vocabulary_size(self):
        """Number of target ids: the entries of target_vocab.json, else of vocab.json."""
        return self._target_vocabulary_size

    @property
    def separate_vocabs(self):
        """Whether the target side has its own vocabulary (target_vocab.json)."""
        return self._target_vocabulary_items is not None

    @property
    def pad_id(self):
        """The id of `<pad>`."""
        return self._pad_id

    @property
    def unk_id(self):
        """The id of `<unk>`."""
        return self._unk_id

    @property
    def start_id(self):
        """The decoder's start id: `pad_id`, unless a `bos_token` was given."""
        return self._start_id

    @property
    def end_id(self):
        """The id of `</s>`."""
        return self._end_id

    @property
    def vocabulary(self):
        """A dict of piece to id: the contents of vocab.json."""
        return dict(self._vocabulary_items)

    @property
    def target_vocabulary(self):
        """A dict of piece to id of target_vocab.json, or `None` when it is shared."""
        items = self._target_vocabulary_items
        return None if items is None else dict(items)

    @classmethod
    def from_huggingface(cls, directory):
        """Reads a Hugging Face MarianMT tokenizer folder (e.g. `opus-mt-en-de`).

        Reads `source.spm`, `target.spm` and `vocab.json` (and `target_vocab.json`
        when `tokenizer_config.json` says `separate_vocabs`), and the options of
        `tokenizer_config.json` / `special_tokens_map.json` when present
        (`source_lang`, `target_lang`, the special tokens). When `config.json`'s
        `decoder_start_token_id` is not the pad id, its token is the `bos_token`.

        Args:
            directory: str or path, the checkpoint folder.

        Returns:
            A `MarianTokenizer`.

        Raises:
            ValueError: naming the file that is missing from `directory` or not valid.

        Example:

        >>> import tempfile
        >>> MarianTokenizer.from_huggingface(tempfile.mkdtemp())
        Traceback (most recent call last):
            ...
        ValueError: 'source.spm' is missing from '...': ...
        """
        directory = os.fspath(directory)
        advice = "Pass a MarianMT checkpoint folder (source.spm, target.spm, vocab.json)."
        paths = {
            filename: tokenizer_files.require_file(directory, filename, "MarianTokenizer", advice)
            for filename in (SOURCE_MODEL_FILENAME, TARGET_MODEL_FILENAME, VOCABULARY_FILENAME)
        }
        options = tokenizer_files.read_tokenizer_options(directory)
        models = {}
        for filename in (SOURCE_MODEL_FILENAME, TARGET_MODEL_FILENAME):
            with open(paths[filename], "rb") as file:
                models[filename] = file.read()
        vocabulary = tokenizer_files.read_json_file(
            paths[VOCABULARY_FILENAME], "a JSON object of piece to id"
        )
        vocabulary = tokenizer_files.check_vocabulary_mapping(
            vocabulary, f"'{paths[VOCABULARY_FILENAME]}'", VOCABULARY_FILENAME
        )
        target_vocabulary = None
        if options.get("separate_vocabs"):
            path = tokenizer_files.require_file(
                directory,
                TARGET_VOCABULARY_FILENAME,
                "MarianTokenizer",
                "tokenizer_config.json says `separate_vocabs`: the target vocabulary is needed.",
            )
            target_vocabulary = tokenizer_files.read_json_file(path, "a JSON object of piece to id")
        defaults = {"unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>"}
        tokens = {name: options.get(name) or default for name, default in defaults.items()}
        bos_token = options.get("bos_token")
        start = options["model_config"].get("decoder_start_token_id")
        if bos_token is None and start is not None and start != vocabulary.get(tokens["pad_token"]):
            bos_token = next((t for t, index in vocabulary.items() if index == start), None)
        extra = tokenizer_files.extra_special_tokens(options, {*tokens.values(), bos_token})
        return cls(
            models[SOURCE_MODEL_FILENAME],
            models[TARGET_MODEL_FILENAME],
            vocabulary,
            target_vocabulary=target_vocabulary,
            source_lang=options.get("source_lang"),
            target_lang=options.get("target_lang"),
            bos_token=bos_token,
            additional_special_tokens=[token for token in extra if token in vocabulary],
            **tokens,
        )

    @classmethod
    def from_subword_tokenizer(cls, tokenizer, pad_last=False):
        """A `MarianTokenizer` giving the ids of a `SubwordTokenizer`, to save as Marian files.

        Its SentencePiece model is both `source.spm` and `target.spm`, and vocab.json
        maps each piece to its SentencePiece id, so
        [`tokenize`][keras_transformer.text.MarianTokenizer.tokenize] gives the ids
        of `tokenizer.tokenize` (and
        [`encode`][keras_transformer.text.MarianTokenizer.encode] adds `end_id`). The
        special ids stay those of `tokenizer`: `pad_id=0`, `unk_id=1`, `start_id=2`
        (`<s>`, saved as `bos_token`), `end_id=3`. A text starting with a language
        code (`">>de<<"`) or holding `"<s>"`, `"</s>"`, `"<unk>"` or `"<pad>"` is
        split differently.

        With `pad_last=True` the ids take the layout of the opus-mt folders
        instead, which CTranslate2's converter expects: `<pad>` moves to the last
        id, every other piece's id is one less than its SentencePiece id, and the
        decoder starts from the pad token (`start_id == pad_id`, no `bos_token`).
        Train a new model with such a tokenizer (`examples.translation.train
        --marian` does); a model trained on the `SubwordTokenizer`'s ids needs
        the default layout.

        Args:
            tokenizer: a
                [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer].
            pad_last: bool, Marian's id layout (see above). Defaults to `False`.

        Returns:
            A `MarianTokenizer`.

        Raises:
            ValueError: when `tokenizer` is not a `SubwordTokenizer`.

        Example:

        >>> from keras_transformer.text import SubwordTokenizer
        >>> subword = SubwordTokenizer.train(["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...                                  vocabulary_size=30, byte_fallback=False)
        >>> marian = MarianTokenizer.from_subword_tokenizer(subword)
        >>> marian.tokenize("Two dogs.").numpy().tolist() == (
        ...     subword.tokenize("Two dogs.").numpy().tolist())
        True
        >>> marian.pad_id, marian.unk_id, marian.start_id, marian.end_id
        (0, 1, 2, 3)
        """
        model_proto = getattr(tokenizer, "model_proto", None)
        if type(tokenizer).__name__ != "SubwordTokenizer" or not isinstance(model_proto, bytes):
            raise ValueError(
                "`tokenizer` must be a `SubwordTokenizer` (keras_transformer.text). "
                f"Received: {type(tokenizer).__name__}."
            )
        pieces = tokenizer.id_to_piece(tf.range(tokenizer.vocabulary_size)).numpy()
        pieces = [piece.decode("utf-8") for piece in pieces]
        if pad_last:
            pieces = [piece for piece in pieces if piece != "<pad>"] + ["<pad>"]
        vocabulary = {piece: index for index, piece in enumerate(pieces)}
        return cls(
            model_proto,
            model_proto,
            vocabulary,
            unk_token="<unk>",
            eos_token="</s>",
            pad_token="<pad>",
            bos_token=None if pad_last else "<s>",
        )

    def save_huggingface(self, directory):
        """Writes the files of transformers' `MarianTokenizer`.

        `source.spm`, `target.spm`, `vocab.json` (and `target_vocab.json`) and a
        `tokenizer_config.json`; `transformers.AutoTokenizer.from_pretrained(directory)`
        then gives the ids this tokenizer gives.

        Args:
            directory: str or path, folder to write into; created if missing.

        Example:

        >>> import os, tempfile
        >>> from keras_transformer.text import SubwordTokenizer
        >>> subword = SubwordTokenizer.train(["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...                                  vocabulary_size=30, byte_fallback=False)
        >>> directory = tempfile.mkdtemp()
        >>> MarianTokenizer.from_subword_tokenizer(subword).save_huggingface(directory)
        >>> MarianTokenizer.from_huggingface(directory).vocabulary_size
        30
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        for filename, model_proto in (
            (SOURCE_MODEL_FILENAME, self._source_model_proto),
            (TARGET_MODEL_FILENAME, self._target_model_proto),
        ):
            with open(os.path.join(directory, filename), "wb") as file:
                file.write(model_proto)
        tokenizer_files.write_json_file(
            os.path.join(directory, VOCABULARY_FILENAME), self.vocabulary
        )
        if self.separate_vocabs:
            tokenizer_files.write_json_file(
                os.path.join(directory, TARGET_VOCABULARY_FILENAME), self.target_vocabulary
            )
        config = {"tokenizer_class": "MarianTokenizer"}
        for key in ("source_lang", "target_lang", "unk_token", "eos_token", "pad_token"):
            config[key] = self._config[key]
        if self._config["bos_token"] is not None:
            config["bos_token"] = self._config["bos_token"]
        config["separate_vocabs"] = self.separate_vocabs
        config["model_max_length"] = 512
        tokenizer_files.write_tokenizer_config(
            directory, config, self._config["additional_special_tokens"]
        )

    def save(self, directory):
        """Writes the Hugging Face files (`save_huggingface`); `load` reads them back.

        Args:
            directory: str or path, folder to write into; created if missing.

        Example:

        >>> import tempfile
        >>> from keras_transformer.text import SubwordTokenizer
        >>> subword = SubwordTokenizer.train(["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...                                  vocabulary_size=30, byte_fallback=False)
        >>> directory = tempfile.mkdtemp()
        >>> MarianTokenizer.from_subword_tokenizer(subword).save(directory)
        >>> MarianTokenizer.load(directory).decode(subword.tokenize(["Two dogs."]))
        ['Two dogs.']
        """
        self.save_huggingface(directory)

    @classmethod
    def load(cls, directory):
        """Reads a tokenizer written by `save` (the same as `from_huggingface`).

        Args:
            directory: str or path, the folder given to
                [`save`][keras_transformer.text.MarianTokenizer.save].

        Returns:
            A `MarianTokenizer` giving the same ids as the saved one.
        """
        return cls.from_huggingface(directory)

    def _ids(self, texts, sentencepiece, table):
        """int32 ids of a 1-D string tensor, without `</s>`: a `(batch, None)` ragged tensor."""
        # Special tokens written in the text become segments of their own. The byte 0xFF
        # marks the cuts: UTF-8 text never holds it. (tensorflow-text's `regex_split`
        # would do it in one op, but it cuts a text at its first U+0000.)
        marked = tf.strings.regex_replace(texts, self._special_pattern, _CUT + b"\\0" + _CUT)
        segments = tf.strings.split(marked, sep=_CUT)
        flat = segments.flat_values
        special = self._special_table.lookup(flat)
        is_special = special >= 0
        has_code = tf.strings.regex_full_match(flat, _HAS_LANGUAGE_CODE) & ~is_special
        code = tf.strings.regex_replace(flat, _LANGUAGE_CODE, r"\1", replace_global=False)
        rest = tf.strings.regex_replace(flat, _AFTER_LANGUAGE_CODE, "", replace_global=False)
        rest = tf.where(is_special, "", rest)
        first = tf.where(is_special, special, table.lookup(code))
        has_first = is_special | has_code
        first = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(first, has_first), tf.cast(has_first, tf.int64), validate=False
        )
        pieces = sentencepiece.tokenize(rest)
        tokens = tf.concat([first, tf.ragged.map_flat_values(table.lookup, pieces)], axis=1)
        return segments.with_values(tokens).merge_dims(1, 2)

    def _tokenize(self, inputs, sentencepiece, table):
        texts = tf.convert_to_tensor(inputs, dtype=tf.string)
        if texts.shape.rank not in (0, 1):
            raise ValueError(
                "`inputs` must be a str, a list of str or a `tf.string` tensor of rank 0 or 1. "
                f"Received: shape={texts.shape}"
            )
        if texts.shape.rank == 0:
            return self._ids(tf.expand_dims(texts, 0), sentencepiece, table)[0]
        return self._ids(texts, sentencepiece, table)

    def tokenize(self, inputs):
        """Splits source strings into ids, without `</s>` (the pipelines add it).

        Args:
            inputs: a str, a list of str, or a `tf.string` tensor of rank 0 or 1.

        Returns:
            int32 ids: a 1-D `tf.Tensor` for a single string, a `tf.RaggedTensor`
            of shape `(batch, None)` for a batch.

        Example:

        >>> from keras_transformer.text import SubwordTokenizer
        >>> subword = SubwordTokenizer.train(["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...                                  vocabulary_size=30, byte_fallback=False)
        >>> tokenizer = MarianTokenizer.from_subword_tokenizer(subword)
        >>> ids = tf.function(tokenizer.tokenize)(tf.constant(["Two dogs.", "Zwei Hunde."]))
        >>> ids.shape.as_list(), ids.dtype.name
        ([2, None], 'int32')
        """
        return self._tokenize(inputs, self._source_sentencepiece, self._source_table)

    def tokenize_target(self, inputs):
        """Splits target strings into ids with `target.spm`, without `</s>`.

        transformers' `tokenizer(text_target=...)`, less its `</s>`.

        Args:
            inputs: a str, a list of str, or a `tf.string` tensor of rank 0 or 1.

        Returns:
            int32 ids, laid out as
            [`tokenize`][keras_transformer.text.MarianTokenizer.tokenize]'s.
        """
        return self._tokenize(inputs, self._target_sentencepiece, self._target_table)

    def encode(self, texts):
        """Source ids then `</s>`, as transformers' `tokenizer(texts)["input_ids"]`.

        Args:
            texts: a str or a list of str.

        Returns:
            A list of int for a str, a list of lists of int for a list.
        """
        ids = self.tokenize(texts)
        if isinstance(ids, tf.RaggedTensor):
            return [row + [self._end_id] for row in ids.to_list()]
        return ids.numpy().tolist() + [self._end_id]

    def detokenize(self, ids):
        """Turns target ids back into text, as `decode(ids, skip_special_tokens=True)`.

        Everything from the first `end_id` on is dropped, as are `pad_id`,
        `start_id`, `unk_id` and the other special ids; the pieces are joined, `▁`
        made a space and the ends stripped.

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
        skipped = tf.ragged.map_flat_values(
            lambda values: tf.reduce_any(
                tf.equal(tf.expand_dims(values, -1), self._skipped_ids), axis=-1
            ),
            ids,
        )
        kept = tf.ragged.boolean_mask(ids, before_end & ~skipped)
        surfaces = tf.ragged.map_flat_values(self._surface_table.lookup, tf.cast(kept, tf.int64))
        text = tf.strings.reduce_join(surfaces, axis=1)
        text = tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        text = tf.strings.regex_replace(text, _SPIECE_UNDERLINE, " ")
        text = tf.strings.regex_replace(text, _STRIP_PATTERN, "")
        return text[0] if single else text

    def decode(self, ids):
        """Like `detokenize`, but returns Python `str` (a list for a batch); eager only.

        Args:
            ids: int ids of shape `(length,)` or `(batch, length)`.

        Returns:
            A str for 1-D `ids`, else a list of str.
        """
        return python_strings(self.detokenize(ids))

    def id_to_piece(self, ids):
        """Returns the pieces (`tf.string`) of int `ids` (target side); "" for unknown ids.

        Args:
            ids: an int or int ids of any shape (a list, NumPy array or tensor).

        Returns:
            A `tf.string` tensor of the shape of `ids`.
        """
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.id_to_piece, ids)
        return self._piece_table.lookup(tf.cast(tf.convert_to_tensor(ids), tf.int64))
