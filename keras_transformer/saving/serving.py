"""A translation model as a TensorFlow SavedModel: raw text in, translated text out."""

import pathlib
import shutil
import tempfile

import keras

from keras_transformer.generation.decoding import GenerationOptions, check_positive_int
from keras_transformer.generation.seq2seq import EXTRA_LENGTH, make_search_fn
from keras_transformer.saving.pretrained import replace_directory
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.text.translation_dataset import tokenize_source

SERVING_ENDPOINT = "serve"


def export_serving(
    model,
    tokenizer,
    directory,
    beam_size=4,
    length_penalty=0.6,
    max_source_length=128,
    overwrite=True,
):
    """Exports a translation model with its tokenizer as a string → string SavedModel.

    The SavedModel's `serving_default` signature (also the `serve` function)
    takes a 1-D `tf.string` tensor `sentences` and returns
    `{"translations": tf.string tensor}` of the same length: tokenization,
    beam search (or greedy search with `beam_size=1`) and detokenization all
    run inside the graph. Loading it needs TensorFlow and `import
    tensorflow_text` (for the SentencePiece ops), not `keras_transformer`:

    ```python
    import tensorflow as tf
    import tensorflow_text  # registers the SentencePiece ops

    translator = tf.saved_model.load("runs/multi30k/serving")
    translator.serve(tf.constant(["A man rides a bike."]))
    ```

    Each sentence gets at most its source length + 50 tokens, as in
    `Seq2SeqTransformer.generate`, and its translation does not depend on the
    other sentences of the batch. The search runs as a TensorFlow graph without
    XLA, which would recompile for every new input shape. The export is
    written to a temporary sibling directory and renamed into place, so a
    failed export leaves a previous one intact.

    Args:
        model: a `Seq2SeqTransformer` (TensorFlow backend).
        tokenizer: the `SubwordTokenizer` the model was trained with, for both
            languages.
        directory: str or path of the SavedModel directory to write.
        beam_size: int, beams per sentence; `1` searches greedily. Defaults to `4`.
        length_penalty: float, `alpha` of the GNMT length penalty. Defaults to `0.6`.
        max_source_length: int, longest source (subword ids, end id included)
            translated; longer sentences are cut. Defaults to `128`.
        overwrite: bool, replace an existing export. Defaults to `True`.

    Returns:
        The directory, as a `pathlib.Path`.

    Example:

    >>> bundle = load_pretrained("runs/multi30k/model")
    >>> export_serving(bundle.model, bundle.tokenizer, "runs/multi30k/serving")
    """
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "`export_serving` writes a TensorFlow SavedModel and needs the TensorFlow backend; "
            f"the backend is {keras.backend.backend()!r}. Set KERAS_BACKEND=tensorflow, load "
            "the model with `load_pretrained`, and export from there."
        )
    if not all(hasattr(model, name) for name in ("encode", "decode_step", "initial_cache")):
        raise ValueError(
            "`model` must be a `Seq2SeqTransformer` (an encoder-decoder translation model). "
            f"Received: {type(model).__name__}."
        )
    if not isinstance(tokenizer, SubwordTokenizer):
        raise ValueError(
            f"`tokenizer` must be a `SubwordTokenizer`. Received: {type(tokenizer).__name__}."
        )
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
    directory = pathlib.Path(directory)
    if directory.exists() and not overwrite:
        raise FileExistsError(f"'{directory}' exists; pass `overwrite=True` to replace it.")

    options = GenerationOptions(
        "beam" if beam_size > 1 else "greedy",
        beam_size,
        length_penalty,
        1,
        None,
        1.0,
        1.0,
        0,
        tokenizer.end_id,
        model.pad_id,
        model.target_vocabulary_size,
    )
    translate = _make_translate_fn(model, tokenizer, options, max_source_length)

    # Only the TensorFlow backend gets here; keep the import out of other backends' way.
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(tokenizer)
    archive.add_endpoint(
        SERVING_ENDPOINT,
        translate,
        input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
    )
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(
        tempfile.mkdtemp(prefix=f".{directory.name}.exporting-", dir=directory.parent)
    )
    try:
        archive.write_out(str(staging), verbose=False)
        replace_directory(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


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
        return {"translations": translations}

    return translate
