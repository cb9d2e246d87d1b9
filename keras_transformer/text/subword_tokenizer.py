"""A SentencePiece subword tokenizer shared by source and target languages.

Why SentencePiece (BPE) rather than keras-hub's WordPiece tools, measured on Multi30k
en+de train (58,000 sentences, 8,000 pieces, 2 CPU cores):

| | vocab learning | tokens/sentence val en / de | exact round trip, val en / de |
| --- | --- | --- | --- |
| keras-hub WordPiece | 128-239 s | 14.6 / 15.8 | 44 / 1014, 40 / 1014 |
| SentencePiece unigram | 2.6 s | 15.0 / 15.9 | 1014 / 1014 both |
| SentencePiece BPE | 0.5 s | 14.5 / 15.3 | 1014 / 1014 both |
| SentencePiece BPE + byte fallback (used) | 0.4-1.3 s | 14.5 / 15.4 | 1014 / 1014 both |

WordPiece splits off punctuation and joins pieces with spaces on the way back
("a woman ' s shoulders ."), so its output cannot be scored against raw references
by sacreBLEU. SentencePiece keeps whitespace as a piece ("▁"), so decoding is exact.
BPE is the paper's choice (a shared source-target BPE vocabulary), trains fastest
and gives the shortest sequences. Byte fallback costs 256 ids and makes characters
unseen in training ("😀", "½") round-trip too instead of decoding as "⁇".
"""

import io
import os
import random

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer import compat
from keras_transformer.text.python_tokenizer import python_strings
from keras_transformer.validation import is_int, is_real

MODEL_FILENAME = "subword.model"
VOCABULARY_FILENAME = "subword.vocab"

# The fixed layout every model trained or loaded here must have: padding must be 0
# because batches are padded with zeros and masks are computed as `ids != 0`.
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3
_SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")
# With `train(mask_token=True)`, the id after the special ids hides tokens for masked-LM
# pretraining: a control piece, which no text is ever split into.
MASK_ID, _MASK_PIECE = 4, "<mask>"
_BYTE_PIECES = 256


def _sentencepiece_tokenizer(model_proto):
    tokenizer = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)
    # A model resource that survives `keras.backend.clear_session()`.
    compat.share_sentencepiece_resource(tokenizer, model_proto)
    return tokenizer


def _check_train_arguments(vocabulary_size, model_type, byte_fallback, mask_token):
    """Returns nothing; raises `ValueError` for a bad model type, mask flag or vocabulary size."""
    if model_type not in ("bpe", "unigram"):
        raise ValueError(
            f"`model_type` must be 'bpe' or 'unigram'. Received: model_type={model_type!r}"
        )
    if not isinstance(mask_token, bool):
        raise ValueError(f"`mask_token` must be a bool. Received: mask_token={mask_token!r}")
    minimum = len(_SPECIAL_PIECES) + int(mask_token) + (_BYTE_PIECES if byte_fallback else 0) + 1
    if not is_int(vocabulary_size):
        raise ValueError(
            f"`vocabulary_size` must be an int. Received: vocabulary_size={vocabulary_size!r}"
        )
    if vocabulary_size < minimum:
        raise ValueError(
            f"`vocabulary_size` must be at least {minimum} (4 special ids"
            f"{' + the mask id' if mask_token else ''}"
            f"{' + 256 byte pieces' if byte_fallback else ''} + 1). "
            f"Received: vocabulary_size={vocabulary_size}"
        )


def _training_sentences(texts):
    """The non-empty sentences of `texts` as a list of str, bytes decoded from UTF-8."""
    if isinstance(texts, (str, bytes)):
        raise ValueError(
            "`texts` must be an iterable of sentences, not a single string. "
            "Wrap it in a list: `train([text])`."
        )
    sentences = []
    for text in texts:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise ValueError(
                f"`texts` must hold str (or UTF-8 bytes) items. Received an item of type "
                f"{type(text).__name__}: {text!r}"
            )
        if text:
            sentences.append(text)
    if not sentences:
        raise ValueError("`texts` holds no non-empty sentence; pass the training sentences.")
    return sentences


class SubwordTokenizer(tf.Module):
    """Subword tokenizer: text ↔ int32 ids with a SentencePiece model.

    Tokenizing and detokenizing are TensorFlow ops (tensorflow-text), so they run
    eagerly, inside `tf.data.Dataset.map` and inside a `tf.function` exported in a
    SavedModel (load it after `import tensorflow_text`). As a `tf.Module`, the
    tokenizer is tracked when assigned as an attribute of a module being saved.

    Special ids are fixed: `pad_id=0`, `unk_id=1`, `start_id=2`, `end_id=3`.
    [`tokenize`][keras_transformer.text.SubwordTokenizer.tokenize] never emits them
    (except `unk_id` for characters unseen in training when the model has no byte
    fallback); adding start/end is the data pipeline's job.

    Args:
        model_proto: bytes, a serialized SentencePiece model as written by
            [`train`][keras_transformer.text.SubwordTokenizer.train] or
            [`save`][keras_transformer.text.SubwordTokenizer.save] (the
            `subword.model` file).
        name: str, name of the module. Defaults to `"subword_tokenizer"`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer
    >>> texts = ["A man in a blue shirt.", "Ein Mann in einem blauen Hemd."] * 50
    >>> tokenizer = SubwordTokenizer.train(texts, vocabulary_size=300)
    >>> ids = tokenizer.tokenize(["A man in a blue shirt."])
    >>> tokenizer.detokenize(ids).numpy()[0].decode("utf-8")
    'A man in a blue shirt.'
    >>> tokenizer.decode(tokenizer.tokenize(["Ein Hemd 😀."]))  # byte fallback
    ['Ein Hemd 😀.']
    >>> tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id
    (0, 1, 2, 3)

    Raises:
        ValueError: when `model_proto` is not a SentencePiece model, or one
            whose ids 0-3 are not `<pad>`, `<unk>`, `<s>`, `</s>`.
    """

    def __init__(self, model_proto, name="subword_tokenizer"):
        super().__init__(name=name)
        if not isinstance(model_proto, bytes) or not model_proto:
            raise ValueError(
                "`model_proto` must be the non-empty bytes of a SentencePiece model. "
                f"Received: {type(model_proto).__name__}. Use `SubwordTokenizer.train(...)` "
                "or `SubwordTokenizer.load(directory)`."
            )
        try:
            self._sentencepiece = _sentencepiece_tokenizer(model_proto)
            pieces = self._sentencepiece.id_to_string(tf.range(len(_SPECIAL_PIECES)))
            self._vocabulary_size = int(self._sentencepiece.vocab_size())
        except (tf.errors.OpError, ValueError) as error:
            raise ValueError(
                f"`model_proto` is not a valid SentencePiece model: {error}"
            ) from error
        pieces = tuple(piece.decode("utf-8") for piece in pieces.numpy())
        if pieces != _SPECIAL_PIECES:
            raise ValueError(
                f"The SentencePiece model must reserve ids 0-3 for {_SPECIAL_PIECES} "
                f"(pad, unk, start, end); this one has {pieces}. Train it with "
                "`SubwordTokenizer.train`, which fixes that layout."
            )
        self._mask_id = None
        if self._vocabulary_size > MASK_ID:
            piece = self._sentencepiece.id_to_string(MASK_ID).numpy().decode("utf-8")
            self._mask_id = MASK_ID if piece == _MASK_PIECE else None
        self._model_proto = model_proto
        self._python_processor = None

    pad_id = PAD_ID
    unk_id = UNK_ID
    start_id = START_ID
    end_id = END_ID

    @property
    def vocabulary_size(self):
        """Number of ids, special ids and byte pieces included."""
        return self._vocabulary_size

    @property
    def mask_id(self):
        """The id of `<mask>` (4) if trained with `mask_token=True`, else `None`."""
        return self._mask_id

    @property
    def model_proto(self):
        """The serialized SentencePiece model (bytes)."""
        return self._model_proto

    @classmethod
    def train(
        cls,
        texts,
        vocabulary_size=8000,
        model_type="bpe",
        byte_fallback=True,
        max_sentence_length=4192,
        num_threads=None,
        mask_token=False,
    ):
        """Learns a subword vocabulary from raw sentences, in memory.

        Train on the source and target training sentences together to get one shared
        vocabulary, as in the paper: en and de share the Latin script, names and
        numbers, so a shared vocabulary spends fewer pieces for the same coverage and
        allows tying the encoder, decoder and output embeddings.

        The text is not normalized (SentencePiece's `identity` rule, no whitespace
        squeezing), so `detokenize(tokenize(s)) == s` for any `s` without leading
        whitespace; with `byte_fallback`, even characters never seen in training
        come back exactly instead of as `unk_id`. Training is deterministic.

        Args:
            texts: iterable of str, the training sentences (one per item, no
                newlines), e.g. every English and German sentence of the train split.
            vocabulary_size: int, number of ids including the 4 special ids and,
                with `byte_fallback`, 256 byte pieces. Defaults to `8000`.
            model_type: str, `"bpe"` or `"unigram"`. Defaults to `"bpe"`.
            byte_fallback: bool, encode characters missing from the vocabulary as
                UTF-8 byte pieces rather than `unk_id`. Defaults to `True`.
            max_sentence_length: int, longest sentence in bytes used for training;
                longer ones are skipped. Defaults to `4192`.
            num_threads: int, training threads. Defaults to `None`, the CPU count.
            mask_token: bool, reserve id 4 for `<mask>` (`mask_id`), which
                hides tokens in masked-language-model pretraining
                ([`keras_transformer.text.mask_tokens`][]); no text is split into
                it. Defaults to `False`.

        Returns:
            A `SubwordTokenizer`.

        Raises:
            ValueError: for a bad argument, a `vocabulary_size` below the
                minimum (4 special ids, the mask id, 256 byte pieces, + 1), or
                one SentencePiece cannot fill from `texts` (with byte fallback
                it also needs a piece per distinct character).

        Example:

        >>> tokenizer = SubwordTokenizer.train(["a b c", "a b"] * 10, vocabulary_size=266)
        >>> tokenizer.vocabulary_size
        266
        >>> small = SubwordTokenizer.train(["a b c", "a b"] * 10, vocabulary_size=10,
        ...                                byte_fallback=False, mask_token=True)
        >>> small.vocabulary_size, small.mask_id
        (10, 4)
        """
        import sentencepiece  # Only learning a vocabulary needs it; tokenizing does not.

        _check_train_arguments(vocabulary_size, model_type, byte_fallback, mask_token)
        sentences = _training_sentences(texts)
        model = io.BytesIO()
        try:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model,
                vocab_size=vocabulary_size,
                model_type=model_type,
                # Keep the text as it is: BLEU is scored on the detokenized raw text.
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                character_coverage=1.0,
                byte_fallback=byte_fallback,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=START_ID,
                eos_id=END_ID,
                pad_piece=_SPECIAL_PIECES[PAD_ID],
                unk_piece=_SPECIAL_PIECES[UNK_ID],
                bos_piece=_SPECIAL_PIECES[START_ID],
                eos_piece=_SPECIAL_PIECES[END_ID],
                control_symbols=[_MASK_PIECE] if mask_token else [],
                max_sentence_length=max_sentence_length,
                num_threads=num_threads or os.cpu_count() or 1,
                minloglevel=2,
            )
        except RuntimeError as error:
            # SentencePiece refuses a size too large for the text and one too small for its
            # characters; the advice differs.
            if "smaller than required_chars" in str(error):
                advice = "Raise `vocabulary_size` (it must cover every distinct character)"
            else:
                advice = "Lower `vocabulary_size` or pass more text"
            raise ValueError(
                f"SentencePiece could not learn {vocabulary_size} pieces from {len(sentences)} "
                f"sentences: {str(error).rstrip('. ')}. {advice}."
            ) from error
        return cls(model.getvalue())

    def tokenize(self, inputs):
        """Splits strings into subword ids.

        Args:
            inputs: a str, a list of str, or a `tf.string` tensor of rank 0 or 1.

        Returns:
            int32 ids without start/end ids: a 1-D `tf.Tensor` for a single string,
            a `tf.RaggedTensor` of shape `(batch, None)` for a batch.

        Example:

        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> ids = tokenizer.tokenize(["Two dogs.", "Zwei Hunde."])
        >>> ids.shape.as_list(), ids.dtype.name
        ([2, None], 'int32')
        >>> tokenizer.tokenize("Two dogs.").shape.rank  # one string: a 1-D tensor
        1
        """
        return self._sentencepiece.tokenize(tf.convert_to_tensor(inputs, dtype=tf.string))

    def tokenize_with_dropout(self, texts, dropout, seed=None):
        """Splits strings into subword ids, skipping each merge with probability `dropout`.

        With a BPE model this is BPE-dropout (Provilkov et al., 2020): the same
        word is split differently from call to call, a data augmentation that
        regularises translation models trained on small corpora. The ids still
        decode to the exact input. A unigram model samples segmentations instead,
        with `dropout` as the smoothing `alpha` of subword regularization.

        It runs in Python with the `sentencepiece` package (tensorflow-text's
        sampling op takes no seed), on one thread, so that within one process a
        `seed` gives the same ids every time. Between processes the ids differ
        even for the same `seed` (measured with sentencepiece 0.2.x), so training
        with it does not repeat bit for bit from run to run. The seed is
        process-wide in `sentencepiece`: two threads sampling at once may swap
        their seeds.

        Args:
            texts: list of str.
            dropout: float in `[0, 1)`, the probability of skipping a merge; `0`
                gives the ids of
                [`tokenize`][keras_transformer.text.SubwordTokenizer.tokenize].
                A `0.1` makes Multi30k's sentences ~40% longer in pieces.
            seed: int, seed of the sampling. Defaults to `None` (random).

        Returns:
            A list of lists of int ids, without start/end ids.

        Raises:
            ValueError: for a `dropout` outside `[0, 1)` or a single string as
                `texts`.

        Example:

        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> ids = tokenizer.tokenize_with_dropout(["Two dogs."], 0.5, seed=1)
        >>> tokenizer.decode(ids)  # however it is split, it decodes exactly
        ['Two dogs.']
        >>> tokenizer.tokenize_with_dropout(["Two dogs."], 0.0) == [
        ...     tokenizer.tokenize("Two dogs.").numpy().tolist()]
        True

        References:
            - [Provilkov et al., 2020](https://arxiv.org/abs/1910.13267),
              "BPE-Dropout: Simple and Effective Subword Regularization".
        """
        import sentencepiece

        if not is_real(dropout):
            raise ValueError(f"`dropout` must be a float in [0, 1). Received: dropout={dropout!r}")
        if not 0 <= dropout < 1:
            raise ValueError(f"`dropout` must be in [0, 1), e.g. 0.1. Received: dropout={dropout}")
        if isinstance(texts, (str, bytes)):
            raise ValueError("`texts` must be a list of str; wrap a single one: `[text]`.")
        texts = [text.decode("utf-8") if isinstance(text, bytes) else text for text in texts]
        if self._python_processor is None:
            self._python_processor = sentencepiece.SentencePieceProcessor(
                model_proto=self._model_proto
            )
        if dropout == 0:
            return self._python_processor.encode(texts, out_type=int)
        # The seed is global to sentencepiece, and each call seeds afresh, so set it
        # every time: otherwise every call would draw the same segmentation.
        sentencepiece.set_random_generator_seed(
            seed if seed is not None else random.SystemRandom().randrange(2**31)
        )
        return self._python_processor.encode(
            texts,
            out_type=int,
            enable_sampling=True,
            alpha=float(dropout),
            nbest_size=-1,
            num_threads=1,
        )

    def detokenize(self, ids):
        """Turns subword ids back into text.

        Everything from the first `end_id` on is dropped, as are `pad_id` and
        `start_id`, so raw decoder output (start id, sentence, end id, padding or
        anything generated after the end) decodes to the sentence alone.

        Args:
            ids: int ids of shape `(length,)` or `(batch, length)`: a list, NumPy
                array, `tf.Tensor` or `tf.RaggedTensor`.

        Returns:
            A `tf.string` tensor: a scalar for 1-D `ids`, shape `(batch,)` otherwise.
            Use [`decode`][keras_transformer.text.SubwordTokenizer.decode] for Python
            strings.

        Raises:
            ValueError: for `ids` of another rank.

        Example:

        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> ids = tokenizer.tokenize("Two dogs.")
        >>> tokenizer.detokenize(tf.concat([[2], ids, [3, 0, 0]], 0)).numpy()
        b'Two dogs.'
        """
        if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
            ids = tf.ragged.constant(ids) if isinstance(ids, (list, tuple)) else ids
        ids = tf.cast(ids, tf.int32)
        if ids.shape.rank not in (1, 2):
            raise ValueError(
                f"`ids` must have rank 1 (one sentence) or 2 (a batch). "
                f"Received: ids.shape={ids.shape}"
            )
        single = ids.shape.rank == 1
        if single:
            ids = tf.expand_dims(ids, 0)
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        before_end = tf.equal(tf.math.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1), 0)
        keep = before_end & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, START_ID)
        text = self._sentencepiece.detokenize(tf.ragged.boolean_mask(ids, keep))
        return text[0] if single else text

    def decode(self, ids):
        """Like `detokenize`, but returns Python `str` (a list for a batch); eager only.

        Args:
            ids: int ids of shape `(length,)` or `(batch, length)`.

        Returns:
            A str for 1-D `ids`, else a list of str.

        Example:

        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> tokenizer.decode([[2, *tokenizer.tokenize("Two dogs.").numpy(), 3]])
        ['Two dogs.']
        >>> tokenizer.decode(tokenizer.tokenize("Zwei Hunde."))
        'Zwei Hunde.'
        """
        return python_strings(self.detokenize(ids))

    def id_to_piece(self, ids):
        """Returns the subword pieces (`tf.string`) of int `ids`, for inspection.

        Args:
            ids: an int or int ids of any shape (a list, NumPy array or tensor).

        Returns:
            A `tf.string` tensor of the shape of `ids`.

        Example:

        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> tokenizer.id_to_piece([0, 1, 2, 3]).numpy().tolist()
        [b'<pad>', b'<unk>', b'<s>', b'</s>']
        """
        return self._sentencepiece.id_to_string(tf.convert_to_tensor(ids, dtype=tf.int32))

    def save(self, directory):
        """Writes `subword.model` (the SentencePiece model) and `subword.vocab`.

        `subword.vocab` lists one piece per line, line `i` holding id `i`; it is for
        people to read and [`load`][keras_transformer.text.SubwordTokenizer.load]
        ignores it.

        Args:
            directory: str or path, folder to write into; created if missing.

        Example:

        >>> import os, tempfile
        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> directory = tempfile.mkdtemp()
        >>> tokenizer.save(directory)
        >>> sorted(os.listdir(directory))
        ['subword.model', 'subword.vocab']
        >>> SubwordTokenizer.load(directory).model_proto == tokenizer.model_proto
        True
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, MODEL_FILENAME), "wb") as file:
            file.write(self._model_proto)
        pieces = self.id_to_piece(tf.range(self._vocabulary_size)).numpy()
        with open(os.path.join(directory, VOCABULARY_FILENAME), "w", encoding="utf-8") as file:
            file.writelines(piece.decode("utf-8") + "\n" for piece in pieces)

    @classmethod
    def load(cls, directory):
        """Reads a tokenizer written by
        [`save`][keras_transformer.text.SubwordTokenizer.save].

        Args:
            directory: str or path, folder holding `subword.model`.

        Returns:
            A `SubwordTokenizer` giving the same ids as the saved one.

        Raises:
            ValueError: when `directory` holds no `subword.model`, or not a
                valid one.

        Example:

        >>> import tempfile
        >>> tokenizer = SubwordTokenizer.train(
        ...     ["Two dogs play.", "Zwei Hunde spielen."] * 10,
        ...     vocabulary_size=30, byte_fallback=False)
        >>> directory = tempfile.mkdtemp()
        >>> tokenizer.save(directory)
        >>> loaded = SubwordTokenizer.load(directory)
        >>> loaded.decode(loaded.tokenize(["Two dogs play."]))
        ['Two dogs play.']
        """
        path = os.path.join(os.fspath(directory), MODEL_FILENAME)
        if not os.path.isfile(path):
            raise ValueError(
                f"No tokenizer model at '{path}'. Pass the `directory` given to "
                "`SubwordTokenizer.save`, or train one with `SubwordTokenizer.train`."
            )
        with open(path, "rb") as file:
            return cls(file.read())
