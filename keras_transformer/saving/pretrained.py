"""One directory holding a trained model, its tokenizer and what is known about it."""

import dataclasses
import datetime
import json
import os
import pathlib

import h5py
import keras

from keras_transformer.saving.atomic import recover_directory, write_directory
from keras_transformer.saving.backend_neutral import (
    backend_neutral_config,
    compiled_for_backend,
    private_backend_classes,
)
from keras_transformer.text.byte_pair_tokenizer import BytePairTokenizer
from keras_transformer.text.marian_tokenizer import MarianTokenizer
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.text.wordpiece_tokenizer import WordPieceTokenizer
from keras_transformer.version import __version__

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
TOKENIZER_DIR = "tokenizer"

# Tokenizers a directory may name; loading never imports a class named in a file.
TOKENIZER_CLASSES = {
    cls.__name__: cls
    for cls in (SubwordTokenizer, MarianTokenizer, WordPieceTokenizer, BytePairTokenizer)
}


class PretrainedDirectoryError(ValueError):
    """A pretrained directory is missing a file or holds a bad one.

    [`load_pretrained`][keras_transformer.saving.load_pretrained] raises it with
    a one-line message naming the path, what is wrong and what to pass instead.
    It is a `ValueError`, so code that catches `ValueError` catches it too.

    Args:
        *args: the message, as for any `ValueError`.

    Example:

    >>> import tempfile
    >>> from keras_transformer.saving import PretrainedDirectoryError, load_pretrained
    >>> try:
    ...     load_pretrained(tempfile.mkdtemp())
    ... except PretrainedDirectoryError as error:
    ...     print(isinstance(error, ValueError), "is an empty directory" in str(error))
    True True
    """


@dataclasses.dataclass
class Pretrained:
    """What `load_pretrained` returns: the model, its tokenizer (or `None`) and the metadata.

    Args:
        model: `keras.Model`, the model, with its trained weights.
        tokenizer: the tokenizer saved with it (a class of `TOKENIZER_CLASSES`), or `None`.
        metadata: dict, what [`save_pretrained`][keras_transformer.saving.save_pretrained]
            recorded (library and Keras versions, backend, date, model and tokenizer
            classes) and the `metadata` passed to it.

    Example:

    >>> import tempfile
    >>> from keras_transformer.models import TransformerClassifier
    >>> from keras_transformer.saving import load_pretrained, save_pretrained
    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["A fine film.", "Two dull hours."] * 10,
    ...                                    vocabulary_size=30, byte_fallback=False)
    >>> model = TransformerClassifier(tokenizer.vocabulary_size, num_classes=2,
    ...                               num_layers=1, hidden_dim=16, num_heads=2,
    ...                               intermediate_dim=32)
    >>> bundle = load_pretrained(save_pretrained(model, tempfile.mkdtemp(), tokenizer))
    >>> type(bundle.model).__name__, type(bundle.tokenizer).__name__
    ('TransformerClassifier', 'SubwordTokenizer')
    >>> bundle.metadata["model_class"], bundle.metadata["library"]
    ('TransformerClassifier', 'keras_transformer')
    """

    model: keras.Model
    tokenizer: object
    metadata: dict


def save_pretrained(model, directory, tokenizer=None, metadata=None, overwrite=True):
    """Saves `model` (and `tokenizer`) to `directory`, atomically.

    The directory holds `config.json` (the model's Keras config), `model.weights.h5`,
    `tokenizer/` (the vocabulary files) and `metadata.json` (library and Keras
    versions, backend, date, plus your `metadata`, e.g. scores, data set and the
    command that trained the model). Everything is written to a staging sibling
    directory first and renamed into place, so a failed or killed save leaves any
    previous save at `directory` loadable and unchanged: the next save deletes what a
    killed one left, and it or
    [`load_pretrained`][keras_transformer.saving.load_pretrained] puts back a
    previous save that a save killed half-way through its swap had set aside.
    Directories and files get the modes `mkdir` and `open` give under the process
    umask (0755 and 0644 under umask 022).

    Args:
        model: a `keras_transformer` model (or any registered Keras model).
        directory: str or path.
        tokenizer: a
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer],
            [`MarianTokenizer`][keras_transformer.text.MarianTokenizer],
            [`WordPieceTokenizer`][keras_transformer.text.WordPieceTokenizer] or
            [`BytePairTokenizer`][keras_transformer.text.BytePairTokenizer], or
            `None`. Defaults to `None`.
        metadata: dict of JSON-serializable facts to keep. Defaults to `None`.
        overwrite: bool, replace an existing save. Defaults to `True`.

    Returns:
        The directory, as a `pathlib.Path`.

    Raises:
        FileExistsError: when `directory` exists and `overwrite` is `False`.
        ValueError: for a tokenizer of another class than those.

    Example:

    >>> import tempfile
    >>> from keras_transformer.models import TransformerClassifier
    >>> from keras_transformer.saving import load_pretrained, save_pretrained
    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["A fine film.", "Two dull hours."] * 10,
    ...                                    vocabulary_size=30, byte_fallback=False)
    >>> model = TransformerClassifier(tokenizer.vocabulary_size, num_classes=2,
    ...                               num_layers=1, hidden_dim=16, num_heads=2,
    ...                               intermediate_dim=32)
    >>> directory = save_pretrained(model, tempfile.mkdtemp() + "/imdb", tokenizer,
    ...                             metadata={"accuracy": 0.91})
    >>> directory.name, sorted(path.name for path in directory.iterdir())
    ('imdb', ['config.json', 'metadata.json', 'model.weights.h5', 'tokenizer'])
    """
    directory = pathlib.Path(directory)
    if directory.exists() and not overwrite:
        raise FileExistsError(f"'{directory}' exists; pass `overwrite=True` to replace it.")
    if tokenizer is not None and type(tokenizer).__name__ not in TOKENIZER_CLASSES:
        raise ValueError(
            f"`tokenizer` must be one of {sorted(TOKENIZER_CLASSES)}. "
            f"Received: {type(tokenizer).__name__}."
        )
    info = {
        "library": "keras_transformer",
        "library_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model_class": type(model).__name__,
        "tokenizer_class": None if tokenizer is None else type(tokenizer).__name__,
        **(metadata or {}),
    }

    def write(staging):
        # Public class names only, so that every backend reads what this one writes.
        config = backend_neutral_config(keras.saving.serialize_keras_object(model))
        (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2), encoding="utf-8")
        model.save_weights(staging / WEIGHTS_FILE)
        if tokenizer is not None:
            tokenizer.save(staging / TOKENIZER_DIR)
        (staging / METADATA_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")

    return write_directory(directory, "saving", write)


def _reason(error):
    """`error` on one line, shortened: library messages can span lines and pages."""
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}"


def _read_json_object(path):
    if not path.is_file():
        raise PretrainedDirectoryError(
            f"'{path.name}' is missing from '{path.parent}'. The directory is incomplete: "
            "save it again with `save_pretrained`."
        )
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PretrainedDirectoryError(f"'{path}' is not valid JSON ({_reason(error)}).") from error
    if not isinstance(value, dict):
        raise PretrainedDirectoryError(
            f"'{path}' holds a JSON {type(value).__name__}, not an object (a mapping of names "
            "to values): the file is damaged or was written by something else."
        )
    return value


def _check_directory(directory):
    """Says what `directory` is when it is not a `save_pretrained` directory."""
    if not os.path.lexists(directory) and recover_directory(directory):
        return  # A save killed between its two renames had retired it; it is back.
    wanted = (
        "`load_pretrained` wants a directory written by `save_pretrained` "
        f"({CONFIG_FILE}, {WEIGHTS_FILE}, {METADATA_FILE})"
    )
    if not directory.exists():
        raise PretrainedDirectoryError(
            f"No pretrained directory at '{directory}': nothing exists at that path."
        )
    if not directory.is_dir():
        if directory.suffix == ".keras":
            what = (
                "a Keras `.keras` archive: load it with `keras.saving.load_model`, "
                "not `load_pretrained`"
            )
        elif directory.name in (CONFIG_FILE, WEIGHTS_FILE, METADATA_FILE):
            what = f"one file of a saved model: pass the directory holding it, '{directory.parent}'"
        else:
            what = "not a directory"
        raise PretrainedDirectoryError(f"'{directory}' is a file, {what}. {wanted}.")
    if (directory / CONFIG_FILE).is_file():
        return
    if (directory / "saved_model.pb").is_file():
        raise PretrainedDirectoryError(
            f"'{directory}' is a TensorFlow SavedModel written by `export_serving`: load it "
            "with `tf.saved_model.load` (after `import tensorflow_text`), or pass the "
            "directory written by `save_pretrained` to `load_pretrained`."
        )
    if (directory / "model" / CONFIG_FILE).is_file():
        raise PretrainedDirectoryError(
            f"'{directory}' is a training run folder; the saved model is in "
            f"'{directory / 'model'}': pass that."
        )
    if not any(directory.iterdir()):
        raise PretrainedDirectoryError(f"'{directory}' is an empty directory. {wanted}.")
    if not (directory / METADATA_FILE).exists() and not (directory / WEIGHTS_FILE).exists():
        raise PretrainedDirectoryError(
            f"'{directory}' is not a pretrained directory: it holds none of its files. {wanted}."
        )
    # Otherwise some files are there: the missing one is named when it is read.


def _check_no_other_backend_class(path, config):
    """Importing another backend's private code crashes the process (PyTorch's after
    TensorFlow's: a segmentation fault), so such a class is named and refused instead."""
    here = keras.backend.backend()
    for module, class_name, backend in private_backend_classes(config):
        if backend != here:
            raise PretrainedDirectoryError(
                f"'{path}' names `{module}.{class_name}`, a class of Keras's private "
                f"{backend} backend code, which this process ({here}) cannot import safely: "
                f"load it with KERAS_BACKEND={backend}."
            )


def _check_weight_shapes(model, path):
    """Keras skips unmatched entries silently; a file of another model must fail instead."""
    stored = []

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not name.startswith("optimizer/"):
            stored.append(tuple(item.shape))

    try:
        with h5py.File(path, "r") as file:
            file.visititems(visit)
    except Exception as error:
        raise PretrainedDirectoryError(
            f"'{path}' is not a readable weights file ({_reason(error)}). It "
            "is truncated or corrupted: save the model again with `save_pretrained`."
        ) from error
    expected = [tuple(weight.shape) for weight in model.weights]
    if sorted(stored) != sorted(expected):
        raise PretrainedDirectoryError(
            f"'{path}' could not be loaded into the model of '{CONFIG_FILE}': it holds "
            f"{len(stored)} arrays where the model has {len(expected)} weights, or their "
            "shapes differ. The file belongs to another model."
        )


def _vocabulary_sizes(model):
    """The number of ids each token embedding of `model` takes, by attribute name."""
    names = ("vocabulary_size", "source_vocabulary_size", "target_vocabulary_size")
    return {
        name: getattr(model, name) for name in names if isinstance(getattr(model, name, None), int)
    }


def _check_tokenizer_fits(model, tokenizer, tokenizer_dir):
    """A tokenizer of another model would feed ids the embeddings do not have, or waste some."""
    sizes = _vocabulary_sizes(model)
    wrong = {name: size for name, size in sizes.items() if size != tokenizer.vocabulary_size}
    if wrong:
        described = ", ".join(f"{name}={size}" for name, size in wrong.items())
        raise PretrainedDirectoryError(
            f"The tokenizer in '{tokenizer_dir}' has {tokenizer.vocabulary_size} ids but the "
            f"model of '{CONFIG_FILE}' embeds {described}: the tokenizer belongs to another "
            "model. Save the model with the tokenizer it was trained with."
        )


def load_pretrained(directory):
    """Loads what `save_pretrained` wrote: needs only `keras_transformer`.

    Given something else, it says what it found and what to pass instead: a training
    run folder (pass its `model/`), an
    [`export_serving`][keras_transformer.saving.export_serving] SavedModel (load it
    with `tf.saved_model.load`), a `.keras` file (`keras.saving.load_model`), another
    file, an empty directory or a missing path. If a save to `directory` was killed
    between its two renames, the previous save it had set aside is put back first.

    A directory saved on another backend loads the same way. Its compile settings
    are kept, except `jit_compile`, which Keras stores as the saving backend resolved
    it (`True` on JAX, where it means XLA; on PyTorch it would mean `torch.compile`):
    it is read as `"auto"`, this backend's default.

    Args:
        directory: str or path.

    Returns:
        A [`Pretrained`][keras_transformer.saving.Pretrained] with `.model`,
        `.tokenizer` (or `None`) and `.metadata`.

    Raises:
        PretrainedDirectoryError: (a `ValueError`) with a one-line message naming the
            path and the missing or bad file: a file that is not valid JSON or not a
            JSON object, a config this library cannot build, weights that are truncated,
            corrupted or of another model, a tokenizer that does not load or whose
            vocabulary size differs from the model's.

    Example:

    A save and a load give the same model, tokenizer and metadata:

    >>> import tempfile
    >>> from keras_transformer.models import TransformerClassifier
    >>> from keras_transformer.saving import load_pretrained, save_pretrained
    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["A fine film.", "Two dull hours."] * 10,
    ...                                    vocabulary_size=30, byte_fallback=False)
    >>> model = TransformerClassifier(tokenizer.vocabulary_size, num_classes=2,
    ...                               num_layers=1, hidden_dim=16, num_heads=2,
    ...                               intermediate_dim=32)
    >>> directory = save_pretrained(model, tempfile.mkdtemp(), tokenizer,
    ...                             metadata={"accuracy": 0.91})
    >>> bundle = load_pretrained(directory)
    >>> bundle.metadata["accuracy"], bundle.tokenizer.vocabulary_size
    (0.91, 30)
    >>> ids = tokenizer.tokenize(["A fine film."]).to_tensor()
    >>> bool(keras.ops.all(bundle.model(ids) == model(ids)))
    True

    Anything else is refused, with what it is.

    >>> load_pretrained(directory / "config.json")
    Traceback (most recent call last):
        ...
    keras_transformer.saving.pretrained.PretrainedDirectoryError: '...config.json' is a file, ...
    """
    directory = pathlib.Path(directory)
    _check_directory(directory)
    metadata = _read_json_object(directory / METADATA_FILE)
    config = _read_json_object(directory / CONFIG_FILE)
    _check_no_other_backend_class(directory / CONFIG_FILE, config)
    config = backend_neutral_config(config)  # an optimizer named by an older save
    # Saved on JAX, `jit_compile=True` would train with `torch.compile` on PyTorch.
    saved_on = metadata.get("backend")
    config = compiled_for_backend(
        config, saved_on if isinstance(saved_on, str) else None, keras.backend.backend()
    )
    try:
        model = keras.saving.deserialize_keras_object(config)
    except Exception as error:
        model = error
    if not isinstance(model, keras.Model):
        reason = f" ({_reason(model)})" if isinstance(model, Exception) else ""
        raise PretrainedDirectoryError(
            f"'{directory / CONFIG_FILE}' does not describe a model this library can build{reason}."
        )
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise PretrainedDirectoryError(
            f"'{WEIGHTS_FILE}' is missing from '{directory}'. The directory is incomplete: "
            "save it again with `save_pretrained`."
        )
    _check_weight_shapes(model, weights)
    try:
        model.load_weights(weights)
    except Exception as error:
        raise PretrainedDirectoryError(
            f"'{weights}' could not be loaded into the model of '{CONFIG_FILE}' "
            f"({_reason(error)}). The file is corrupted or belongs to "
            "another model."
        ) from error
    tokenizer = None
    tokenizer_class = metadata.get("tokenizer_class")
    if tokenizer_class is not None:
        if tokenizer_class not in TOKENIZER_CLASSES:
            raise PretrainedDirectoryError(
                f"'{directory / METADATA_FILE}' names an unknown tokenizer class "
                f"{tokenizer_class!r}; known: {sorted(TOKENIZER_CLASSES)}."
            )
        try:
            tokenizer = TOKENIZER_CLASSES[tokenizer_class].load(directory / TOKENIZER_DIR)
        except Exception as error:
            raise PretrainedDirectoryError(
                f"The tokenizer in '{directory / TOKENIZER_DIR}' could not be loaded "
                f"({_reason(error)})."
            ) from error
        _check_tokenizer_fits(model, tokenizer, directory / TOKENIZER_DIR)
    return Pretrained(model=model, tokenizer=tokenizer, metadata=metadata)
