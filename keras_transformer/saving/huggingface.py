"""Hugging Face checkpoint folders (MarianMT, BERT, GPT-2) in and out of our models."""

import contextlib
import json
import pathlib
import warnings

from keras_transformer.saving import checkpoint_tensors as ct
from keras_transformer.saving import huggingface_bert as bert
from keras_transformer.saving import huggingface_gpt2 as gpt2
from keras_transformer.saving import huggingface_marian as marian
from keras_transformer.saving.atomic import write_directory
from keras_transformer.saving.pretrained import (
    CONFIG_FILE,
    METADATA_FILE,
    Pretrained,
    PretrainedDirectoryError,
)
from keras_transformer.saving.safetensors_files import SAFETENSORS_FILE, WeightFiles, write_tensors

ARCHITECTURES = {module.MODEL_TYPE: module for module in (marian, bert, gpt2)}
# What each tokenizer reads, for the message of a folder without one.
TOKENIZER_FILES = {
    "marian": ("source.spm", "target.spm", "vocab.json"),
    "bert": ("vocab.txt",),
    "gpt2": ("vocab.json", "merges.txt"),
}


def load_huggingface(directory, allow_pickle=False):
    """Loads a Hugging Face MarianMT, BERT or GPT-2 folder as one of our models.

    Reads `config.json`, the weights (`model.safetensors`, or its shards) and,
    when the folder has them, the tokenizer files; nothing is downloaded. The
    model is built from this library's layers, so everything else works on it:
    `fit`, `generate`, `quantize`, LoRA,
    [`save_pretrained`][keras_transformer.saving.save_pretrained],
    [`export_serving`][keras_transformer.saving.export_serving], `model.export`,
    and [`save_huggingface`][keras_transformer.saving.save_huggingface] writes
    it back.

    The checkpoint's `architectures` decide the model and the tokenizer:

    - `MarianMTModel`: a [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer]
      and a [`MarianTokenizer`][keras_transformer.text.MarianTokenizer];
    - `BertForMaskedLM`, `BertModel`: a [`MaskedLM`][keras_transformer.models.MaskedLM]
      and a [`WordPieceTokenizer`][keras_transformer.text.WordPieceTokenizer];
    - `BertForSequenceClassification`: a
      [`TransformerClassifier`][keras_transformer.models.TransformerClassifier] and a
      `WordPieceTokenizer`;
    - `GPT2LMHeadModel`, `GPT2Model`: a
      [`TransformerLM`][keras_transformer.models.TransformerLM] and a
      [`BytePairTokenizer`][keras_transformer.text.BytePairTokenizer].

    A `BertModel` folder has no masked-LM head: the `MaskedLM`'s head is new
    (random), its encoder the checkpoint's, ready for `TransformerClassifier`'s
    [`from_encoder`][keras_transformer.models.TransformerClassifier.from_encoder].
    The start and end ids of `generate` come from the checkpoint's config.

    Args:
        directory: str or path, the folder (as `save_pretrained` of
            transformers writes it).
        allow_pickle: bool, also read PyTorch's `pytorch_model.bin` when the
            folder has no safetensors file. Unpickling runs code from the file:
            pass `True` only for files you trust. Defaults to `False`.

    Returns:
        A [`Pretrained`][keras_transformer.saving.Pretrained] with `.model`,
        `.tokenizer` (`None` when the folder has no tokenizer files, with a
        warning) and `.metadata` (the checkpoint's `model_type`, `architecture`
        and `transformers_version`).

    Raises:
        PretrainedDirectoryError: (a `ValueError`) naming what is wrong: no
            such folder, no `config.json`, an unsupported `model_type` or
            architecture, a value of `config.json` no model can have (by its
            key: `hidden_size` not divisible by `num_attention_heads`, a size
            below 1, ...), a size of `config.json` its tensors do not have
            (the key, the tensor and both sizes; checked from the safetensors
            header before anything is built), only a pickle file, a missing,
            unexpected or mis-shaped tensor (with the expected shape), a
            setting we do not compute.

    Example:

    A tiny random Marian model written by transformers, then loaded:

    >>> import tempfile
    >>> import transformers
    >>> from keras_transformer.saving import load_huggingface
    >>> config = transformers.MarianConfig(
    ...     vocab_size=60, d_model=16, encoder_layers=1, decoder_layers=1,
    ...     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
    ...     decoder_ffn_dim=32, pad_token_id=59, eos_token_id=0,
    ...     decoder_start_token_id=59)
    >>> directory = tempfile.mkdtemp()
    >>> transformers.MarianMTModel(config).save_pretrained(directory)
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # no tokenizer files in this folder
    ...     bundle = load_huggingface(directory)
    >>> type(bundle.model).__name__, bundle.model.start_id, bundle.model.end_id
    ('Seq2SeqTransformer', 59, 0)
    """
    directory = pathlib.Path(directory)
    config = _read_config(directory)
    model_type = config.get("model_type")
    if model_type not in ARCHITECTURES:
        raise PretrainedDirectoryError(
            f"'{directory / CONFIG_FILE}' has model_type={model_type!r}; supported: "
            f"{sorted(ARCHITECTURES)}."
        )
    module = ARCHITECTURES[model_type]
    architecture = (config.get("architectures") or [module.ARCHITECTURES[0]])[0]
    if architecture not in module.ARCHITECTURES:
        raise PretrainedDirectoryError(
            f"'{directory / CONFIG_FILE}' holds a {architecture}; of model_type "
            f"{model_type!r} this library reads {', '.join(module.ARCHITECTURES)}."
        )
    source = f"'{directory}'"
    # config.json's values, then its sizes against the tensors' shapes (the safetensors
    # headers alone): a config that disagrees with its tensors, or claims a huge size, is
    # refused before any tensor is read or any layer allocated.
    with _config_keys(directory, architecture):
        module.check_config(config, directory / CONFIG_FILE, architecture)
    weights = WeightFiles(directory, allow_pickle=allow_pickle)
    shapes = weights.shapes()
    with _config_keys(directory, architecture):
        sizes = module.sizes(config, shapes, architecture)
    ct.check_sizes(sizes, shapes, source, weights.name)
    tensors = weights.tensors()
    ignored = module.IGNORED
    with _config_keys(directory, architecture):
        if module is marian:
            model = marian.model_from_config(config, tensors, source)
            entries = marian.tensors(model)
        elif module is bert:
            tensors = _modern_layer_norm_names(tensors)
            model = bert.model_from_config(config, architecture, source)
            entries = bert.tensors(model, bert.prefix_of(tensors), architecture)
            if architecture == "BertModel":
                ignored += ("pooler.dense.weight", "pooler.dense.bias")
        else:
            model = gpt2.model_from_config(config, source)
            entries = gpt2.tensors(model, gpt2.prefix_of(tensors))
    ct.assign(tensors, entries, source, ignored=ignored)
    tokenizer = _load_tokenizer(directory, model_type)
    metadata = {
        "source": "huggingface",
        "model_type": model_type,
        "architecture": architecture,
        "transformers_version": config.get("transformers_version"),
        "model_class": type(model).__name__,
        "tokenizer_class": None if tokenizer is None else type(tokenizer).__name__,
    }
    return Pretrained(model=model, tokenizer=tokenizer, metadata=metadata)


@contextlib.contextmanager
def _config_keys(directory, architecture):
    """A key that config.json lacks, named as such."""
    try:
        yield
    except KeyError as error:
        raise PretrainedDirectoryError(
            f"'{directory / CONFIG_FILE}' lacks {error}, which a {architecture} config holds."
        ) from error


def _read_config(directory):
    if not directory.is_dir():
        raise PretrainedDirectoryError(
            f"'{directory}' is not a directory: pass a Hugging Face checkpoint folder "
            "(config.json and model.safetensors)."
        )
    path = directory / CONFIG_FILE
    if not path.is_file():
        hint = ""
        if (directory / METADATA_FILE).is_file():
            hint = " It looks like this library's `save_pretrained` folder: use `load_pretrained`."
        raise PretrainedDirectoryError(f"No '{CONFIG_FILE}' in '{directory}'.{hint}")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PretrainedDirectoryError(f"'{path}' is not valid JSON ({error}).") from error
    if not isinstance(config, dict):
        raise PretrainedDirectoryError(f"'{path}' is not a JSON object.")
    if "model_type" not in config and "keras_transformer" in json.dumps(config)[:2000]:
        raise PretrainedDirectoryError(
            f"'{path}' is this library's own config: use `load_pretrained` for that folder."
        )
    return config


def _modern_layer_norm_names(tensors):
    """Older BERT files name the layer norms' weights `gamma` and `beta`."""
    renamed = {}
    for name, value in tensors.items():
        if name.endswith("LayerNorm.gamma"):
            name = name[: -len("gamma")] + "weight"
        elif name.endswith("LayerNorm.beta"):
            name = name[: -len("beta")] + "bias"
        renamed[name] = value
    return renamed


def _load_tokenizer(directory, model_type):
    files = TOKENIZER_FILES[model_type]
    # transformers 5 writes BERT's and GPT-2's tokenizers as tokenizer.json alone.
    fast_file = model_type != "marian" and (directory / "tokenizer.json").is_file()
    if not fast_file and not all((directory / name).is_file() for name in files):
        warnings.warn(
            f"'{directory}' has no tokenizer files ({', '.join(files)}): the model is loaded "
            "without a tokenizer (`.tokenizer` is None).",
            stacklevel=3,
        )
        return None
    from keras_transformer.text.byte_pair_tokenizer import BytePairTokenizer
    from keras_transformer.text.marian_tokenizer import MarianTokenizer
    from keras_transformer.text.wordpiece_tokenizer import WordPieceTokenizer

    tokenizer_class = {
        "marian": MarianTokenizer,
        "bert": WordPieceTokenizer,
        "gpt2": BytePairTokenizer,
    }[model_type]
    return tokenizer_class.from_huggingface(directory)


def save_huggingface(model, directory, tokenizer=None, overwrite=True):
    """Writes `model` (and `tokenizer`) as a Hugging Face checkpoint folder.

    `transformers`' `AutoModel…from_pretrained(directory)` reads it and
    computes the same logits; CTranslate2's converter reads the Marian ones
    (`ct2-transformers-converter --model DIRECTORY`). The folder holds
    `config.json`, `model.safetensors`, `generation_config.json` where the
    architecture has one, and the tokenizer's files. It is written to a
    staging folder first and swapped in, like
    [`save_pretrained`][keras_transformer.saving.save_pretrained].

    - [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer] with
      Marian's options → `MarianMTModel`;
    - [`MaskedLM`][keras_transformer.models.MaskedLM] with BERT's options →
      `BertForMaskedLM`;
    - [`TransformerClassifier`][keras_transformer.models.TransformerClassifier]
      with BERT's options and `pooling="pooler"` →
      `BertForSequenceClassification`;
    - [`TransformerLM`][keras_transformer.models.TransformerLM] with GPT-2's
      options → `GPT2LMHeadModel`.

    Marian's options: post-norm, `layer_norm_epsilon=1e-5`,
    `interleave_sinusoids=False`, an `end_id` (what
    [`load_huggingface`][keras_transformer.saving.load_huggingface] gives).
    BERT's: post-norm, `position="learned"`, `scale_embeddings=False`,
    `embedding_layer_norm=True`. GPT-2's: pre-norm, `position="learned"`,
    `scale_embeddings=False`, tied output embeddings.

    Args:
        model: one of the models above.
        directory: str or path.
        tokenizer: the model's tokenizer: a
            [`MarianTokenizer`][keras_transformer.text.MarianTokenizer] (or a
            [`SubwordTokenizer`][keras_transformer.text.SubwordTokenizer],
            written as Marian's files), a
            [`WordPieceTokenizer`][keras_transformer.text.WordPieceTokenizer] or
            a [`BytePairTokenizer`][keras_transformer.text.BytePairTokenizer].
            Defaults to `None`.
        overwrite: bool, replace an existing folder. Defaults to `True`.

    Returns:
        The directory, as a `pathlib.Path`.

    Raises:
        ValueError: for another model class, an option the format cannot
            express (each named with the value it needs), a quantised model or
            one with LoRA adapters (merge them first: `model.merge_lora()`).
        FileExistsError: when `directory` exists and `overwrite` is `False`.

    Example:

    >>> import tempfile
    >>> from keras_transformer.models import TransformerLM
    >>> from keras_transformer.saving import save_huggingface
    >>> lm = TransformerLM(100, num_layers=1, hidden_dim=16, num_heads=2,
    ...                    intermediate_dim=32, position="learned",
    ...                    max_sequence_length=32, norm_first=True,
    ...                    scale_embeddings=False, end_id=99, pad_id=99)
    >>> directory = save_huggingface(lm, tempfile.mkdtemp() + "/gpt2")
    >>> sorted(path.name for path in directory.iterdir())
    ['config.json', 'generation_config.json', 'model.safetensors']
    """
    from keras_transformer.layers.sublayer_quantization import (
        descendant_layers,
        quantized_sublayers,
    )
    from keras_transformer.models import (
        MaskedLM,
        Seq2SeqTransformer,
        TransformerClassifier,
        TransformerLM,
    )

    directory = pathlib.Path(directory)
    if directory.exists() and not overwrite:
        raise FileExistsError(f"'{directory}' exists; pass `overwrite=True` to replace it.")
    if quantized_sublayers(model):
        raise ValueError(
            "The model is quantised; Hugging Face's format holds float weights. Save the "
            "model before `quantize`."
        )
    if any(getattr(layer, "lora_enabled", False) for layer in descendant_layers(model)):
        raise ValueError(
            "The model has LoRA adapters; merge them first: "
            "`save_huggingface(model.merge_lora(), ...)`."
        )
    generation = None
    if isinstance(model, Seq2SeqTransformer):
        config, generation = marian.config_from_model(model)
        entries = marian.tensors(model)
        tokenizer = _marian_tokenizer(tokenizer)
    elif isinstance(model, (MaskedLM, TransformerClassifier)):
        config, _ = bert.config_from_model(model)
        entries = bert.tensors(model, "bert.")
    elif isinstance(model, TransformerLM):
        config, generation = gpt2.config_from_model(model)
        entries = gpt2.tensors(model, "transformer.")
    else:
        raise ValueError(
            "`model` must be a Seq2SeqTransformer (MarianMT), a MaskedLM or "
            "TransformerClassifier (BERT) or a TransformerLM (GPT-2). "
            f"Received: {type(model).__name__}."
        )
    if tokenizer is not None and not hasattr(tokenizer, "save_huggingface"):
        raise ValueError(
            f"A {type(tokenizer).__name__} has no Hugging Face files; pass the tokenizer that "
            "`load_huggingface` gave, or `tokenizer=None`."
        )
    tensors = ct.collect(entries)
    config["dtype"] = "float32"

    def write(staging):
        (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2), encoding="utf-8")
        if generation:
            text = json.dumps(generation, indent=2)
            (staging / "generation_config.json").write_text(text, encoding="utf-8")
        write_tensors(staging / SAFETENSORS_FILE, tensors)
        if tokenizer is not None:
            tokenizer.save_huggingface(staging)

    return write_directory(directory, "saving", write)


def _marian_tokenizer(tokenizer):
    from keras_transformer.text.subword_tokenizer import SubwordTokenizer

    if isinstance(tokenizer, SubwordTokenizer):
        from keras_transformer.text.marian_tokenizer import MarianTokenizer

        return MarianTokenizer.from_subword_tokenizer(tokenizer)
    return tokenizer
