"""Sentence embeddings as sentence-transformers folders define them: pooled, maybe normalised.

A sentence-transformers folder is a BERT checkpoint (which `load_huggingface`
reads) plus `modules.json`, listing the steps after the encoder: `Pooling`
(its `1_Pooling/config.json` picks mean or first-token pooling, among others)
and, often, `Normalize` (unit L2 norm). This module reads those two steps and
computes them over our encoder's hidden states.
"""

import json
import os
import pathlib

import numpy as np

from keras_transformer.saving.pretrained import PretrainedDirectoryError
from keras_transformer.validation import check_bool, check_one_of, check_positive_int

MODULES_FILE = "modules.json"
# The Transformer step's own settings, with the `max_seq_length` its texts are cut to.
SETTINGS_FILE = "sentence_bert_config.json"
TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"
# The `Pooling` config's modes, by the name this module gives them.
POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
POOLINGS = ("mean", "cls")
# sentence-transformers' floors: the token count of a mean, the norm of `Normalize`.
MIN_COUNT = 1e-9
MIN_NORM = 1e-12


def sentence_embeddings(
    pretrained,
    texts,
    directory=None,
    pooling=None,
    normalize=None,
    max_length=None,
    batch_size=32,
):
    """Sentence embeddings of `texts`, as a sentence-transformers folder computes them.

    Each text is tokenized (with the start and end tokens), cut to
    `max_length` ids (the end token kept), and run through the model's
    encoder in batches of similar lengths; the hidden states are then pooled
    over the text's tokens (padding left out): their mean (`"mean"`) or the
    first token's (`"cls"`), and, where the folder's `modules.json` lists
    `Normalize`, divided by their L2 norm.

    The pooling, the normalisation and the length come from the folder:
    `modules.json` (a `Transformer`, a `Pooling`, optionally a `Normalize`),
    the `Pooling` step's `config.json` (`pooling_mode_mean_tokens`,
    `pooling_mode_cls_token`, ...) and `sentence_bert_config.json`
    (`max_seq_length`). Arguments given explicitly take precedence.

    Args:
        pretrained: the folder (str or path), loaded with
            [`load_huggingface`][keras_transformer.saving.load_huggingface] and
            read for its settings; or the
            [`Pretrained`][keras_transformer.saving.Pretrained] that
            `load_huggingface` gave (an encoder-only model, such as BERT's
            `MaskedLM`, and its tokenizer).
        texts: a str, or a list of str.
        directory: str or path, the sentence-transformers folder whose
            settings apply to a `Pretrained`. Defaults to `None`: `pretrained`
            when it is a folder, else no folder (then `pooling` is required).
        pooling: `"mean"` or `"cls"`. Defaults to `None`: the folder's.
        normalize: bool, divide each embedding by its L2 norm. Defaults to
            `None`: whether the folder's `modules.json` lists `Normalize`
            (`False` without a folder).
        max_length: int, the most ids a text keeps, start and end tokens
            included. Defaults to `None`: the folder's `max_seq_length`, else
            the model's `max_sequence_length`.
        batch_size: int, texts per call of the encoder. Defaults to `32`.

    Returns:
        A float32 NumPy array `(len(texts), hidden_dim)`, in the order of
        `texts`; `(hidden_dim,)` for a single str.

    Raises:
        PretrainedDirectoryError: for a folder whose `modules.json` lists a
            step other than `Transformer`, `Pooling` and `Normalize`, or whose
            pooling is not one mean or first-token pooling (max, weighted mean,
            several modes at once, ...), each named; or no `pooling` given
            and no folder's `modules.json` to say it.
        ValueError: for a model that is not encoder-only, a bundle without a
            tokenizer, or a bad argument.

    Example:

    A tiny BERT-like model and WordPiece vocabulary, mean-pooled and
    normalised (a real folder's `modules.json` says so itself):

    >>> import os, tempfile
    >>> import numpy as np
    >>> from keras_transformer.models import MaskedLM
    >>> from keras_transformer.saving import Pretrained, sentence_embeddings
    >>> from keras_transformer.text import WordPieceTokenizer
    >>> folder = tempfile.mkdtemp()
    >>> words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "dog", "runs", "sleeps"]
    >>> with open(os.path.join(folder, "vocab.txt"), "w") as file:
    ...     _ = file.write("\\n".join(words) + "\\n")
    >>> tokenizer = WordPieceTokenizer.from_huggingface(folder)
    >>> model = MaskedLM(len(words), num_layers=1, hidden_dim=16, num_heads=2,
    ...                  intermediate_dim=32, position="learned", max_sequence_length=16,
    ...                  num_token_types=2)
    >>> vectors = sentence_embeddings(Pretrained(model, tokenizer, {}),
    ...                               ["a dog runs", "a dog sleeps"],
    ...                               pooling="mean", normalize=True)
    >>> vectors.shape, vectors.dtype, np.allclose(np.linalg.norm(vectors, axis=1), 1)
    ((2, 16), dtype('float32'), True)
    """
    from keras_transformer.models.encoder_model_base import EncoderModelBase

    if pooling is not None:
        check_one_of("pooling", pooling, POOLINGS)
    if normalize is not None:
        check_bool("normalize", normalize)
    check_positive_int("max_length", max_length, allow_none=True)
    check_positive_int("batch_size", batch_size)
    if isinstance(pretrained, (str, os.PathLike)):
        directory = pretrained if directory is None else directory
    settings = None if directory is None else _folder_settings(directory)
    if settings is None and pooling is None:
        where = "No sentence-transformers folder was given"
        if directory is not None:
            where = f"'{directory}' has no {MODULES_FILE}"
        raise PretrainedDirectoryError(
            f"{where}, so nothing says how to pool: pass `pooling=` "
            f"{' or '.join(map(repr, POOLINGS))} (and `normalize=`)."
        )
    settings = settings or {}
    if isinstance(pretrained, (str, os.PathLike)):
        from keras_transformer.saving.huggingface import load_huggingface

        pretrained = load_huggingface(pathlib.Path(pretrained) / settings.get("transformer", ""))
    model, tokenizer = pretrained.model, pretrained.tokenizer
    if not isinstance(model, EncoderModelBase):
        raise ValueError(
            "Sentence embeddings pool an encoder's hidden states: the model must be "
            "encoder-only (BERT's `MaskedLM`, a `TransformerClassifier`). Received: "
            f"{type(model).__name__}."
        )
    if tokenizer is None:
        raise ValueError(
            "The bundle has no tokenizer (its folder had no tokenizer files): add them "
            "(vocab.txt or tokenizer.json) and load it again."
        )
    pooling = settings["pooling"] if pooling is None else pooling
    normalize = settings.get("normalize", False) if normalize is None else normalize
    dimension = settings.get("dimension")
    if dimension is not None and dimension != model.hidden_dim:
        raise PretrainedDirectoryError(
            f"'{directory}': the Pooling step's `word_embedding_dimension` is {dimension}, but "
            f"the model's hidden states have {model.hidden_dim} values."
        )
    limit = model.max_sequence_length
    if max_length is not None and limit is not None and max_length > limit:
        raise ValueError(
            f"`max_length={max_length}` is beyond the model's {limit} positions "
            "(`max_sequence_length`)."
        )
    if max_length is None:
        max_length = settings.get("max_length") or limit
        if max_length is not None and limit is not None:
            max_length = min(max_length, limit)

    single = isinstance(texts, str)
    encoded = tokenizer.encode([texts] if single else list(texts))
    rows = [_cut(row, max_length, tokenizer.end_id) for row in encoded]
    embeddings = np.zeros((len(rows), model.hidden_dim), "float32")
    # Longest first, as sentence-transformers batches them: little padding per batch.
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        embeddings[chosen] = _pooled(model, [rows[i] for i in chosen], tokenizer.pad_id, pooling)
    if normalize:
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        embeddings = embeddings / np.maximum(norms, MIN_NORM)
    return embeddings[0] if single else embeddings


def _cut(row, max_length, end_id):
    """`row` cut to `max_length` ids, its end token kept, as transformers truncates."""
    if max_length is None or len(row) <= max_length:
        return row
    if row[-1] == end_id and max_length > 1:
        return row[: max_length - 1] + [end_id]
    return row[:max_length]


def _pooled(model, rows, pad_id, pooling):
    """One batch's pooled hidden states, float32 `(len(rows), hidden_dim)`."""
    import keras

    lengths = np.array([len(row) for row in rows])
    ids = np.full((len(rows), lengths.max()), pad_id, "int32")
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    hidden = np.asarray(keras.ops.convert_to_numpy(model.encode(ids)), "float32")
    if pooling == "cls":
        return hidden[:, 0]
    # The text's own tokens, as the tokenizer's attention mask marks them.
    mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype("float32")
    total = np.einsum("btd,bt->bd", hidden, mask)
    return total / np.maximum(mask.sum(axis=1, keepdims=True), MIN_COUNT)


def _folder_settings(directory):
    """The pooling steps of a sentence-transformers folder, or `None` without `modules.json`.

    Returns `{"transformer": path, "pooling": "mean" | "cls", "normalize":
    bool, "dimension": int or None, "max_length": int or None}`; refuses
    (`PretrainedDirectoryError`) a step or a pooling mode this module does
    not compute, naming it.
    """
    directory = pathlib.Path(directory)
    path = directory / MODULES_FILE
    if not path.is_file():
        return None
    modules = _read_json(path)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise PretrainedDirectoryError(f"'{path}' is not a list of modules (JSON objects).")
    types = [module.get("type") for module in modules]
    unknown = [kind for kind in types if kind not in (TRANSFORMER, POOLING, NORMALIZE)]
    expected = [TRANSFORMER, POOLING] + ([NORMALIZE] if NORMALIZE in types else [])
    if unknown or types != expected:
        found = ", ".join(str(kind) for kind in (unknown or types))
        raise PretrainedDirectoryError(
            f"'{path}' lists {found}; this library computes a Transformer, then a Pooling, "
            "then optionally a Normalize step, and nothing else."
        )
    transformer, pooling = modules[0], modules[1]
    pooling_path = directory / str(pooling.get("path", "")) / "config.json"
    config = _read_json(pooling_path)
    if not isinstance(config, dict):
        raise PretrainedDirectoryError(f"'{pooling_path}' is not a JSON object.")
    modes = [key for key in POOLING_MODES if config.get(key)]
    if len(modes) != 1 or POOLING_MODES[modes[0]] not in POOLINGS:
        asked = ", ".join(f"`{key}`" for key in modes) or "no pooling mode"
        raise PretrainedDirectoryError(
            f"'{pooling_path}' asks for {asked}; this library computes one of "
            "`pooling_mode_mean_tokens` (the mean of the tokens) and `pooling_mode_cls_token` "
            "(the first token)."
        )
    transformer_path = str(transformer.get("path", ""))
    settings_path = directory / transformer_path / SETTINGS_FILE
    max_length = None
    if settings_path.is_file():
        max_length = (_read_json(settings_path) or {}).get("max_seq_length")
        check_positive_int(f"{SETTINGS_FILE}'s max_seq_length", max_length, allow_none=True)
    return {
        "transformer": transformer_path,
        "pooling": POOLING_MODES[modes[0]],
        "normalize": NORMALIZE in types,
        "dimension": config.get("word_embedding_dimension"),
        "max_length": max_length,
    }


def _read_json(path):
    try:
        return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise PretrainedDirectoryError(f"No '{path}', which {MODULES_FILE} names.") from error
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PretrainedDirectoryError(f"'{path}' is not valid JSON ({error}).") from error
