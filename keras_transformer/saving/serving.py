"""A model and its tokenizer as a TensorFlow SavedModel that takes raw text.

`export_serving` is the entry point for every model kind: it checks the arguments, builds
the kind's serving function (translation here, classification in `classifier_serving.py`)
and writes the SavedModel atomically.
"""

import pathlib

import keras

from keras_transformer.generation.decoding import GenerationOptions, check_positive_int
from keras_transformer.generation.seq2seq import EXTRA_LENGTH, make_search_fn
from keras_transformer.models.transformer_classifier import TransformerClassifier
from keras_transformer.models.transformer_lm import TransformerLM
from keras_transformer.saving.atomic import write_directory
from keras_transformer.saving.classifier_serving import make_classify_fn
from keras_transformer.saving.language_model_serving import make_generate_fn
from keras_transformer.text.byte_pair_graph import BytePairGraphTokenizer
from keras_transformer.text.byte_pair_tokenizer import BytePairTokenizer
from keras_transformer.text.marian_tokenizer import MarianTokenizer
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.text.translation_dataset import tokenize_source
from keras_transformer.text.wordpiece_graph import WordPieceGraphTokenizer
from keras_transformer.text.wordpiece_tokenizer import WordPieceTokenizer

# Tokenizers made of TensorFlow ops, which a SavedModel can hold.
TRACEABLE_TOKENIZERS = (SubwordTokenizer, MarianTokenizer)
# Tokenizers that run in Python, and their TensorFlow-ops versions, which the SavedModel holds.
GRAPH_TOKENIZERS = {
    WordPieceTokenizer: WordPieceGraphTokenizer,
    BytePairTokenizer: BytePairGraphTokenizer,
}

SERVING_ENDPOINT = "serve"

TRANSLATION, CLASSIFICATION, LANGUAGE_MODEL = "translation", "classification", "language"
# The keyword arguments of `export_serving` that only one model kind uses.
KIND_ARGUMENTS = {
    TRANSLATION: ("beam_size", "length_penalty", "max_source_length"),
    CLASSIFICATION: ("max_length", "head_fraction"),
    LANGUAGE_MODEL: ("max_new_tokens", "max_prompt_length"),
}
# The tokenizers each model kind can be served with.
KIND_TOKENIZERS = {
    TRANSLATION: (SubwordTokenizer, MarianTokenizer),
    CLASSIFICATION: (SubwordTokenizer, MarianTokenizer, WordPieceTokenizer, BytePairTokenizer),
    LANGUAGE_MODEL: (SubwordTokenizer, BytePairTokenizer),
}
DEFAULT_BEAM_SIZE = 4
DEFAULT_LENGTH_PENALTY = 0.6
DEFAULT_MAX_SOURCE_LENGTH = 128
# A blank sentence, whitespace as Python's `str.strip` sees it (RE2's `\s` is ASCII only),
# so the SavedModel and a Python translator agree on which sentences are empty. The last
# whitespace code point is U+3000.
BLANK_PATTERN = "[{}]*".format(
    "".join(f"\\x{{{code:x}}}" for code in range(0x3001) if chr(code).isspace())
)


def export_serving(
    model,
    tokenizer,
    directory,
    beam_size=None,
    length_penalty=None,
    max_source_length=None,
    overwrite=True,
    *,
    max_length=None,
    head_fraction=None,
    max_new_tokens=None,
    max_prompt_length=None,
):
    """Exports a model with its tokenizer as a SavedModel that takes raw text.

    The SavedModel's `serving_default` signature (also the `serve` function)
    takes a 1-D `tf.string` tensor `sentences`; tokenization and the model run
    inside the graph. What it returns depends on the model:

    - a [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer] returns
      `{"translations": tf.string tensor}` of the same length, by beam search (or greedy search with
      `beam_size=1`) and detokenization. Each sentence gets at most its source length + 50 tokens,
      as in
      [`Seq2SeqTransformer.generate`][keras_transformer.models.Seq2SeqTransformer.generate], and its
      translation does not depend on the other sentences of the batch. The search runs as
      a TensorFlow graph without XLA, which would recompile for every new input shape.
    - a [`TransformerClassifier`][keras_transformer.models.TransformerClassifier] returns
      `{"label": int32 (batch,), "probabilities": float32 (batch, num_classes)}`: the
      texts are laid out and cut by
      [`tokenize_for_classification`][keras_transformer.text.tokenize_for_classification]
      with `max_length` and `head_fraction` (give the values used with
      [`make_classification_dataset`][keras_transformer.text.make_classification_dataset] in
      training), and the probabilities are the softmax of the logits, in float32. `label` is
      their arg-max (the lowest class on a tie). A BERT model's token types are all 0,
      as `model.predict` gives them to ids alone.
    - a [`TransformerLM`][keras_transformer.models.TransformerLM] returns
      `{"texts": tf.string tensor}` of the same length: each prompt's greedy continuation
      (the new text only), at most `max_new_tokens` tokens, ending at the tokenizer's end
      id, as [`TransformerLM.generate`][keras_transformer.models.TransformerLM.generate]
      gives it and the tokenizer's `detokenize` reads it. A prompt is its ids alone (no
      start id, as GPT-2's tokenizer encodes it), its last `max_prompt_length` ids when
      longer; an empty prompt starts from the start id alone (GPT-2's `<|endoftext|>`).
      The search runs as a TensorFlow graph without XLA.

    A [`WordPieceTokenizer`][keras_transformer.text.WordPieceTokenizer] (BERT) or a
    [`BytePairTokenizer`][keras_transformer.text.BytePairTokenizer] (GPT-2) runs in
    Python; the SavedModel holds its TensorFlow-ops version
    (`keras_transformer.text.wordpiece_graph.WordPieceGraphTokenizer`,
    `keras_transformer.text.byte_pair_graph.BytePairGraphTokenizer`), which gives the same
    ids (the one difference: bytes that are not UTF-8, which the Python tokenizers refuse,
    are read as `decode("utf-8", errors="replace")` reads them).

    Loading needs TensorFlow and `import tensorflow_text` (for the SentencePiece
    and WordPiece ops), not `keras_transformer`:

    ```python
    import tensorflow as tf
    import tensorflow_text  # registers the SentencePiece ops

    translator = tf.saved_model.load("runs/multi30k/serving")
    translator.serve(tf.constant(["A man rides a bike."]))
    ```

    An empty batch returns empty outputs, and an empty or whitespace-only sentence
    translates to `""`. The input must be a 1-D `tf.string` tensor: another dtype is
    refused when the function is called, another shape (e.g. 2-D) when it runs, by
    the `EnsureShape` node `sentences_must_be_1d`.

    The export is written to a staging sibling directory and renamed into place,
    so a failed or killed export leaves a previous one loadable and unchanged; the
    next export cleans up what a killed one left. Directories and files get the
    modes `mkdir` and `open` give under the process umask.

    Arguments of another model kind are refused with a `ValueError` (e.g.
    `beam_size` for a classifier), rather than ignored.

    Args:
        model: a `Seq2SeqTransformer`, a `TransformerClassifier` or a
            `TransformerLM` (TensorFlow backend).
        tokenizer: the tokenizer the model was trained with: a
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer] (for a
            translation model: for both languages), or the tokenizer of a Hugging
            Face folder: a
            [`MarianTokenizer`][keras_transformer.text.MarianTokenizer]
            (translation, classification), a
            [`WordPieceTokenizer`][keras_transformer.text.WordPieceTokenizer]
            (classification) or a
            [`BytePairTokenizer`][keras_transformer.text.BytePairTokenizer]
            (classification, language model).
        directory: str or path of the SavedModel directory to write.
        beam_size: int, translation only: beams per sentence; `1` searches
            greedily. Defaults to `None`, meaning `4`.
        length_penalty: float, translation only: `alpha` of the GNMT length
            penalty. Defaults to `None`, meaning `0.6`.
        max_source_length: int, translation only: longest source (subword ids,
            end id included) translated; longer sentences are cut. Defaults to
            `None`, meaning `128`.
        overwrite: bool, replace an existing export. Defaults to `True`.
        max_length: int >= 3, classification only (keyword-only): the longest
            row of ids, start and end ids included; longer texts are cut, head +
            tail. Defaults to `None`, meaning `256`.
        head_fraction: float in `[0, 1]`, classification only (keyword-only):
            the share of a cut text's pieces taken from its beginning. Defaults
            to `None`, meaning `0.25`.
        max_new_tokens: int >= 1, language model only (keyword-only): the most
            tokens generated per prompt, the end token included. Defaults to
            `None`, meaning `50` (`generate`'s default).
        max_prompt_length: int >= 1, language model only (keyword-only): the
            longest prompt in ids; longer prompts keep their last ids. Defaults
            to `None`, meaning `128`, or with learned positions (GPT-2) at most
            `max_sequence_length + 1 - max_new_tokens`, which an explicit value
            may not exceed either.

    Returns:
        The directory, as a `pathlib.Path`.

    Raises:
        ValueError: on another backend than TensorFlow, for another model
            class or a tokenizer class the model kind cannot be served with, an
            argument of another model kind, a bad size, or a tokenizer whose
            vocabulary differs from the model's.
        FileExistsError: when `directory` exists and `overwrite` is `False`.

    Example:

    A tiny translation model (untrained, so its translations are noise). The
    export and the reload are not run here: tracing and writing the
    SavedModel takes several seconds even for a tiny model.

    >>> import tempfile
    >>> from keras_transformer.models import Seq2SeqTransformer
    >>> from keras_transformer.saving import export_serving
    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["Two dogs play.", "Zwei Hunde spielen."] * 10,
    ...                                    vocabulary_size=30, byte_fallback=False)
    >>> model = Seq2SeqTransformer(tokenizer.vocabulary_size, num_encoder_layers=1,
    ...                            num_decoder_layers=1, hidden_dim=16, num_heads=2,
    ...                            intermediate_dim=32)
    >>> directory = export_serving(model, tokenizer, tempfile.mkdtemp() + "/serving",
    ...                            beam_size=1)  # doctest: +SKIP
    >>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
    >>> translator = tf.saved_model.load(str(directory))  # doctest: +SKIP
    >>> outputs = translator.serve(tf.constant(["Two dogs play.", ""]))  # doctest: +SKIP
    >>> outputs["translations"].shape  # doctest: +SKIP
    TensorShape([2])

    An argument of another model kind is refused before anything is
    traced:

    >>> export_serving(model, tokenizer, tempfile.mkdtemp(), max_length=64)
    Traceback (most recent call last):
        ...
    ValueError: `max_length` does not apply to a Seq2SeqTransformer (translation model). ...
    """
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "`export_serving` writes a TensorFlow SavedModel and needs the TensorFlow backend; "
            f"the backend is {keras.backend.backend()!r}. Set KERAS_BACKEND=tensorflow, load "
            "the model with `load_pretrained`, and export from there."
        )
    kind = _model_kind(model)
    _check_tokenizer(tokenizer, kind, model)
    given = {
        "beam_size": beam_size,
        "length_penalty": length_penalty,
        "max_source_length": max_source_length,
        "max_length": max_length,
        "head_fraction": head_fraction,
        "max_new_tokens": max_new_tokens,
        "max_prompt_length": max_prompt_length,
    }
    for name, value in given.items():
        if value is not None and name not in KIND_ARGUMENTS[kind]:
            raise ValueError(
                f"`{name}` does not apply to a {type(model).__name__} ({kind} model). "
                f"Received: {name}={value!r}. Its arguments are "
                f"{', '.join(f'`{other}`' for other in KIND_ARGUMENTS[kind])}."
            )
    graph_tokenizer = _graph_tokenizer(tokenizer)
    if kind == TRANSLATION:
        endpoint = _translation_endpoint(
            model, tokenizer, beam_size, length_penalty, max_source_length
        )
    elif kind == CLASSIFICATION:
        endpoint = make_classify_fn(model, graph_tokenizer, max_length, head_fraction)
    else:
        endpoint = make_generate_fn(model, graph_tokenizer, max_new_tokens, max_prompt_length)
    directory = pathlib.Path(directory)
    if directory.exists() and not overwrite:
        raise FileExistsError(f"'{directory}' exists; pass `overwrite=True` to replace it.")
    return _write_archive(directory, endpoint, tracked=(model, graph_tokenizer))


def _model_kind(model):
    if isinstance(model, TransformerClassifier):
        return CLASSIFICATION
    if isinstance(model, TransformerLM):
        return LANGUAGE_MODEL
    if all(hasattr(model, name) for name in ("encode", "decode_step", "initial_cache")):
        return TRANSLATION
    raise ValueError(
        "`model` must be a `Seq2SeqTransformer` (an encoder-decoder translation model), a "
        f"`TransformerClassifier` or a `TransformerLM`. Received: {type(model).__name__}."
    )


def _graph_tokenizer(tokenizer):
    """The tokenizer of TensorFlow ops that gives `tokenizer`'s ids (itself if it is one)."""
    for python_class, graph_class in GRAPH_TOKENIZERS.items():
        if isinstance(tokenizer, python_class):
            return graph_class(tokenizer)
    return tokenizer


def _check_tokenizer(tokenizer, kind, model):
    allowed = KIND_TOKENIZERS[kind]
    if isinstance(tokenizer, allowed):
        return
    names = [f"`{cls.__name__}`" for cls in allowed]
    reasons = {
        TRANSLATION: "a SavedModel holds their TensorFlow ops",
        CLASSIFICATION: "a SavedModel holds their TensorFlow ops, or those of "
        "`WordPieceGraphTokenizer` and `BytePairGraphTokenizer`",
        LANGUAGE_MODEL: "the continuations are detokenized in the graph, by TensorFlow ops "
        "or those of `BytePairGraphTokenizer`",
    }
    raise ValueError(
        f"`tokenizer` must be a {', a '.join(names[:-1])} or a {names[-1]} for a "
        f"{type(model).__name__} ({kind} model): {reasons[kind]}. "
        f"Received: {type(tokenizer).__name__}."
    )


def _write_archive(directory, endpoint, tracked):
    """Traces `endpoint` on a batch of strings and writes the SavedModel atomically."""
    # Only the TensorFlow backend gets here; keep the import out of other backends' way.
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    for resource in tracked:
        archive.track(resource)

    def checked_endpoint(sentences):
        # A signature call does not check its input's shape: without this, a 2-D batch
        # would be flattened silently and a scalar would fail deep in the graph.
        return endpoint(tf.ensure_shape(sentences, [None], name="sentences_must_be_1d"))

    archive.add_endpoint(
        SERVING_ENDPOINT,
        checked_endpoint,
        input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
    )
    return write_directory(
        directory, "exporting", lambda staging: archive.write_out(str(staging), verbose=False)
    )


def _translation_endpoint(model, tokenizer, beam_size, length_penalty, max_source_length):
    beam_size = DEFAULT_BEAM_SIZE if beam_size is None else beam_size
    length_penalty = DEFAULT_LENGTH_PENALTY if length_penalty is None else length_penalty
    if max_source_length is None:
        max_source_length = DEFAULT_MAX_SOURCE_LENGTH
    if tokenizer.vocabulary_size != model.target_vocabulary_size:
        raise ValueError(
            f"The tokenizer has {tokenizer.vocabulary_size} ids but the model predicts "
            f"{model.target_vocabulary_size}: pass the tokenizer the model was trained with."
        )
    beam_size = check_positive_int("beam_size", beam_size)
    max_source_length = check_positive_int("max_source_length", max_source_length)
    if max_source_length < 2:
        raise ValueError(
            "`max_source_length` must be at least 2 (one token and the end id). "
            f"Received: max_source_length={max_source_length}."
        )
    options = GenerationOptions(
        method="beam" if beam_size > 1 else "greedy",
        beam_size=beam_size,
        length_penalty=length_penalty,
        num_return_sequences=1,
        top_k=None,
        top_p=1.0,
        temperature=1.0,
        seed=0,
        end_id=tokenizer.end_id,
        pad_id=model.pad_id,
        vocabulary_size=model.target_vocabulary_size,
    )
    return _make_translate_fn(model, tokenizer, options, max_source_length)


def _make_translate_fn(model, tokenizer, options, max_source_length):
    import tensorflow as tf

    search = make_search_fn(options)
    position_limit = model.max_sequence_length if model.position == "learned" else None
    if position_limit is not None:
        max_source_length = min(max_source_length, position_limit)

    def translate(sentences):
        ids = tokenize_source(tokenizer, sentences, max_length=max_source_length)
        source = ids.to_tensor(default_value=model.pad_id)
        batch_size = tf.shape(source)[0]
        # The same budget as `generate`: source length (end id included) + 50 tokens.
        budgets = tf.cast(ids.row_lengths(), tf.int32) + EXTRA_LENGTH
        if position_limit is not None:
            budgets = tf.minimum(budgets, position_limit)
        cache_length = tf.maximum(tf.reduce_max(budgets), 1)
        sequences = tf.concat(
            [
                tf.fill([batch_size, 1], tokenizer.start_id),
                tf.fill([batch_size, cache_length], model.pad_id),
            ],
            axis=1,
        )
        runtime = tuple(tf.constant(value) for value in options.runtime)

        def run():
            generated, _, num_columns = search(model, source, sequences, 1 + budgets, runtime)
            return tokenizer.detokenize(generated[:, 0, 1:num_columns])

        # An empty batch has nothing to search (and no longest sentence to size a cache).
        translations = tf.cond(batch_size > 0, run, lambda: tf.zeros([0], tf.string))
        # Nothing to translate gives nothing, not what the model makes of a lone end id.
        blank = tf.strings.regex_full_match(sentences, BLANK_PATTERN)
        return {"translations": tf.where(blank, "", translations)}

    return translate
