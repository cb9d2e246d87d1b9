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
from keras_transformer.saving.atomic import write_directory
from keras_transformer.saving.classifier_serving import make_classify_fn
from keras_transformer.text.marian_tokenizer import MarianTokenizer
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.text.translation_dataset import tokenize_source

# Tokenizers made of TensorFlow ops, which a SavedModel can hold (WordPiece and byte-level BPE
# run in Python).
TRACEABLE_TOKENIZERS = (SubwordTokenizer, MarianTokenizer)

SERVING_ENDPOINT = "serve"

TRANSLATION, CLASSIFICATION = "translation", "classification"
# The keyword arguments of `export_serving` that only one model kind uses.
KIND_ARGUMENTS = {
    TRANSLATION: ("beam_size", "length_penalty", "max_source_length"),
    CLASSIFICATION: ("max_length", "head_fraction"),
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
      their arg-max (the lowest class on a tie).

    Loading needs TensorFlow and `import tensorflow_text` (for the SentencePiece
    ops), not `keras_transformer`:

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

    Arguments of the other model kind are refused with a `ValueError` (e.g.
    `beam_size` for a classifier), rather than ignored.

    Args:
        model: a `Seq2SeqTransformer` or a `TransformerClassifier` (TensorFlow
            backend).
        tokenizer: the
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer] the
            model was trained with (for a translation model: for both
            languages), or the
            [`MarianTokenizer`][keras_transformer.text.MarianTokenizer] of a
            model from a MarianMT folder.
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

    Returns:
        The directory, as a `pathlib.Path`.

    Raises:
        ValueError: on another backend than TensorFlow, for another model or
            tokenizer class, an argument of the other model kind, a bad size,
            or a tokenizer whose vocabulary differs from the model's.
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

    An argument of the other model kind is refused before anything is
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
    if not isinstance(tokenizer, TRACEABLE_TOKENIZERS):
        raise ValueError(
            "`tokenizer` must be a `SubwordTokenizer` or a `MarianTokenizer` (a SavedModel "
            f"holds their TensorFlow ops). Received: {type(tokenizer).__name__}."
        )
    given = {
        "beam_size": beam_size,
        "length_penalty": length_penalty,
        "max_source_length": max_source_length,
        "max_length": max_length,
        "head_fraction": head_fraction,
    }
    for name, value in given.items():
        if value is not None and name not in KIND_ARGUMENTS[kind]:
            raise ValueError(
                f"`{name}` does not apply to a {type(model).__name__} ({kind} model). "
                f"Received: {name}={value!r}. Its arguments are "
                f"{', '.join(f'`{other}`' for other in KIND_ARGUMENTS[kind])}."
            )
    if kind == TRANSLATION:
        endpoint = _translation_endpoint(
            model, tokenizer, beam_size, length_penalty, max_source_length
        )
    else:
        endpoint = make_classify_fn(model, tokenizer, max_length, head_fraction)
    directory = pathlib.Path(directory)
    if directory.exists() and not overwrite:
        raise FileExistsError(f"'{directory}' exists; pass `overwrite=True` to replace it.")
    return _write_archive(directory, endpoint, tracked=(model, tokenizer))


def _model_kind(model):
    if isinstance(model, TransformerClassifier):
        return CLASSIFICATION
    if all(hasattr(model, name) for name in ("encode", "decode_step", "initial_cache")):
        return TRANSLATION
    raise ValueError(
        "`model` must be a `Seq2SeqTransformer` (an encoder-decoder translation model) or a "
        f"`TransformerClassifier`. Received: {type(model).__name__}."
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
