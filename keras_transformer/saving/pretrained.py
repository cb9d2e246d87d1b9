"""One directory holding a trained model, its tokenizer and what is known about it."""

import dataclasses
import datetime
import json
import os
import pathlib
import shutil
import tempfile
import uuid

import h5py
import keras

from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.version import __version__

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
TOKENIZER_DIR = "tokenizer"

# Tokenizers a directory may name; loading never imports a class named in a file.
TOKENIZER_CLASSES = {"SubwordTokenizer": SubwordTokenizer}


class PretrainedDirectoryError(ValueError):
    """A pretrained directory is missing a file or holds a bad one."""


@dataclasses.dataclass
class Pretrained:
    """What `load_pretrained` returns: the model, its tokenizer (or `None`) and the metadata."""

    model: keras.Model
    tokenizer: object
    metadata: dict


def save_pretrained(model, directory, tokenizer=None, metadata=None, overwrite=True):
    """Saves `model` (and `tokenizer`) to `directory`, atomically.

    The directory holds `config.json` (the model's Keras config), `model.weights.h5`,
    `tokenizer/` (the vocabulary files) and `metadata.json` (library and Keras
    versions, backend, date, plus your `metadata`, e.g. scores, data set and the
    command that trained the model). Everything is written to a temporary sibling
    directory first and renamed into place, so a failed save leaves any previous
    save at `directory` intact.

    Args:
        model: a `keras_transformer` model (or any registered Keras model).
        directory: str or path.
        tokenizer: a `SubwordTokenizer`, or `None`. Defaults to `None`.
        metadata: dict of JSON-serializable facts to keep. Defaults to `None`.
        overwrite: bool, replace an existing save. Defaults to `True`.

    Returns:
        The directory, as a `pathlib.Path`.

    Example:

    >>> save_pretrained(model, "runs/en-de", tokenizer, metadata={"bleu": 38.2})
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
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(
        tempfile.mkdtemp(prefix=f".{directory.name}.saving-", dir=directory.parent)
    )
    try:
        config = keras.saving.serialize_keras_object(model)
        (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2), encoding="utf-8")
        model.save_weights(staging / WEIGHTS_FILE)
        if tokenizer is not None:
            tokenizer.save(staging / TOKENIZER_DIR)
        (staging / METADATA_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
        replace_directory(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def replace_directory(staging, directory):
    """Moves `staging` to `directory`; the old directory survives any failure."""
    if not directory.exists():
        os.rename(staging, directory)
        return
    retired = directory.parent / f".{directory.name}.old-{uuid.uuid4().hex}"
    os.rename(directory, retired)
    try:
        os.rename(staging, directory)
    except BaseException:
        os.rename(retired, directory)
        raise
    shutil.rmtree(retired, ignore_errors=True)


def _read_json(path):
    if not path.is_file():
        raise PretrainedDirectoryError(
            f"'{path.name}' is missing from '{path.parent}'. The directory is incomplete: "
            "save it again with `save_pretrained`."
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PretrainedDirectoryError(f"'{path}' is not valid JSON ({error}).") from error


def _check_weight_shapes(model, path):
    """Keras skips unmatched entries silently; a file of another model must fail instead."""
    stored = []

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not name.startswith("optimizer/"):
            stored.append(tuple(item.shape))

    with h5py.File(path, "r") as file:
        file.visititems(visit)
    expected = [tuple(weight.shape) for weight in model.weights]
    if sorted(stored) != sorted(expected):
        raise ValueError(
            f"it holds {len(stored)} arrays where the model has {len(expected)} weights, or "
            "their shapes differ"
        )


def load_pretrained(directory):
    """Loads what `save_pretrained` wrote: needs only `keras_transformer`.

    Args:
        directory: str or path.

    Returns:
        A `Pretrained` with `.model`, `.tokenizer` (or `None`) and `.metadata`.

    Raises:
        PretrainedDirectoryError: (a `ValueError`) naming the missing or bad file.

    Example:

    >>> bundle = load_pretrained("runs/en-de")
    >>> bundle.model.generate(...)
    """
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise PretrainedDirectoryError(f"No pretrained directory at '{directory}'.")
    metadata = _read_json(directory / METADATA_FILE)
    config = _read_json(directory / CONFIG_FILE)
    try:
        model = keras.saving.deserialize_keras_object(config)
    except Exception as error:
        model = error
    if not isinstance(model, keras.Model):
        reason = f" ({type(model).__name__}: {model})" if isinstance(model, Exception) else ""
        raise PretrainedDirectoryError(
            f"'{directory / CONFIG_FILE}' does not describe a model this library can build{reason}."
        )
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise PretrainedDirectoryError(
            f"'{WEIGHTS_FILE}' is missing from '{directory}'. The directory is incomplete: "
            "save it again with `save_pretrained`."
        )
    try:
        _check_weight_shapes(model, weights)
        model.load_weights(weights)
    except Exception as error:
        raise PretrainedDirectoryError(
            f"'{weights}' could not be loaded into the model of '{CONFIG_FILE}' "
            f"({type(error).__name__}: {error}). The file is corrupted or belongs to "
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
                f"({type(error).__name__}: {error})."
            ) from error
    return Pretrained(model=model, tokenizer=tokenizer, metadata=metadata)
