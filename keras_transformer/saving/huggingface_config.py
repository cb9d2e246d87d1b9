"""Reading a Hugging Face `config.json` into our arguments, and our options back."""

import math

import keras

from keras_transformer.layers.activations import gelu_approximate
from keras_transformer.saving.pretrained import PretrainedDirectoryError
from keras_transformer.validation import is_int, is_real

# transformers' activation names -> ours. "gelu" is the exact (erf) form in both.
ACTIVATIONS = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": gelu_approximate,
    "gelu_pytorch_tanh": gelu_approximate,
    "swish": "silu",
    "silu": "silu",
}
# Ours (as `keras.activations.serialize` names them) -> transformers'.
ACTIVATION_NAMES = {"relu": "relu", "gelu": "gelu", "gelu_approximate": "gelu_new", "silu": "swish"}


def check_values(
    config,
    path,
    architecture,
    sizes=(),
    optional_sizes=(),
    heads=(),
    epsilons=(),
    rates=(),
    token_ids=(),
):
    """Refuses `config.json`'s values before anything is built, naming each key.

    Our constructors would refuse most of these too, but by our argument names
    (`hidden_dim`), which a `config.json` does not use.

    Args:
        config: the parsed `config.json`.
        path: the file, for the message.
        architecture: the checkpoint's class, for the message of a missing key.
        sizes: keys that must hold a positive integer.
        optional_sizes: keys that may also be absent or `null`.
        heads: `(width_key, heads_key)` pairs: the width must divide into the heads.
        epsilons: keys that, when present, must hold a positive number.
        rates: keys that, when present, must hold a number in `[0, 1)`.
        token_ids: keys that, when present and not `null`, must hold a token
            id. An id beyond the vocabulary is left alone: transformers loads
            such files, and the id then never occurs.

    Raises:
        PretrainedDirectoryError: naming the file, every key whose value is
            wrong (with the value) or a required key that is absent.
    """
    for key in sizes:
        if key not in config:
            raise PretrainedDirectoryError(
                f"'{path}' lacks '{key}', which a {architecture} config holds."
            )

    def positive_int(key):
        return is_int(config.get(key)) and config[key] > 0

    problems = []
    divided = {width for width, _ in heads}
    for key in sizes + optional_sizes:
        present = config.get(key) is not None or key in sizes
        if present and key not in divided and not positive_int(key):
            problems.append(f"`{key}` must be a positive integer; got {config.get(key)!r}")
    for width, count in heads:
        if not positive_int(count):
            # Without a valid count the width's own check is all that can be said.
            if not positive_int(width):
                problems.append(f"`{width}` must be a positive integer; got {config[width]!r}")
        elif not positive_int(width) or config[width] % config[count]:
            problems.append(
                f"`{width}` must be a positive integer divisible by `{count}` "
                f"({config[count]}); got {config[width]!r}"
            )
    for key in epsilons:
        value = config.get(key)
        if key in config and not (is_real(value) and 0 < value < math.inf):
            problems.append(f"`{key}` must be a positive number; got {value!r}")
    for key in rates:
        value = config.get(key)
        if key in config and not (is_real(value) and 0 <= value < 1):
            problems.append(f"`{key}` must be a number in [0, 1); got {value!r}")
    for key in token_ids:
        value = config.get(key)
        if value is not None and not (is_int(value) and value >= 0):
            problems.append(
                f"`{key}` must be a non-negative integer token id or null; got {value!r}"
            )
    if problems:
        raise PretrainedDirectoryError(f"'{path}': " + ". ".join(problems) + ".")


def activation_from(config, key, source):
    """Our activation for the checkpoint's `config[key]`, or a clear refusal."""
    name = config.get(key, "gelu")
    if name not in ACTIVATIONS:
        raise PretrainedDirectoryError(
            f"{source}: `{key}` is {name!r}, which has no counterpart here; supported: "
            f"{sorted(ACTIVATIONS)}."
        )
    return ACTIVATIONS[name]


def activation_name(model):
    """transformers' name for `model.activation`, or a refusal naming the option."""
    activation = model.activation
    if isinstance(activation, str):
        activation = keras.activations.get(activation)
    name = getattr(activation, "__name__", "")
    if name not in ACTIVATION_NAMES:
        raise ValueError(
            f"`activation={model.activation!r}` has no counterpart in Hugging Face's format; "
            f"use one of {sorted(ACTIVATION_NAMES)}."
        )
    return ACTIVATION_NAMES[name]


def learned_embedding_problems(model, family):
    """What keeps `model`'s embeddings from `family`'s (BERT, GPT-2): learned, unscaled."""
    problems = []
    if model.position != "learned":
        problems.append(f'`position={model.position!r}` ({family}: "learned")')
    if model.scale_embeddings:
        problems.append(f"`scale_embeddings=True` ({family} does not scale)")
    return problems


def attention_variant_problems(model, family):
    """`model`'s attention variants that `family`'s format lacks: grouped keys, a window."""
    problems = []
    if model.num_key_value_heads not in (None, model.num_heads):
        problems.append(f"`num_key_value_heads={model.num_key_value_heads}` ({family}: None)")
    if model.sliding_window is not None:
        problems.append(f"`sliding_window={model.sliding_window}` ({family}: None)")
    return problems


def refuse(source, problems):
    """One error for every setting of a checkpoint that we cannot compute."""
    if problems:
        raise PretrainedDirectoryError(
            f"{source} uses settings this library does not compute: " + "; ".join(problems) + "."
        )


def refuse_options(model, problems):
    """One error naming every option of `model` that the format cannot express."""
    if problems:
        raise ValueError(
            f"This {type(model).__name__} cannot be written in Hugging Face's format: "
            + "; ".join(problems)
            + "."
        )
