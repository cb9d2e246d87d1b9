"""Reading a Hugging Face `config.json` into our arguments, and our options back."""

import keras

from keras_transformer.layers.activations import gelu_approximate
from keras_transformer.saving.pretrained import PretrainedDirectoryError

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
