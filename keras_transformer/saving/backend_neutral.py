"""Model configs that every Keras backend can read, whichever backend wrote them.

Keras on PyTorch builds its optimizers from backend-specific subclasses, and a compiled
model's config names them by their private module (`"module":
"keras.src.backend.torch.optimizers.torch_adamw"`). Reading such a config on another
backend imports that module, and with it PyTorch's backend code after TensorFlow or JAX:
a crash (a segmentation fault, with TensorFlow loaded), or an `ImportError` where PyTorch is
not installed. The public class (`keras.optimizers.AdamW`) is the same optimizer with the
same config on every backend, so configs are written with it, and read with it when an
older save names the private one. Any other class from a backend's private modules is
refused by name, before anything is imported.
"""

import keras

_PRIVATE_BACKEND_PREFIX = "keras.src.backend."
_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


def _backend_of(module):
    """`"torch"` for `"keras.src.backend.torch.optimizers..."`, else `None`."""
    if not isinstance(module, str) or not module.startswith(_PRIVATE_BACKEND_PREFIX):
        return None
    name = module[len(_PRIVATE_BACKEND_PREFIX) :].split(".")[0]
    return name if name in _BACKENDS else None


def _public_optimizer(class_name):
    candidate = getattr(keras.optimizers, class_name, None) if isinstance(class_name, str) else None
    return isinstance(candidate, type) and issubclass(candidate, keras.optimizers.Optimizer)


def backend_neutral_config(config):
    """A copy of a serialized Keras object in which optimizers name their public class.

    Args:
        config: the JSON-like dict of `keras.saving.serialize_keras_object`.

    Returns:
        The same structure, with every object whose module is a backend's private
        optimizer module (e.g. `keras.src.backend.torch.optimizers.torch_adam`) named as
        `keras.optimizers.<ClassName>`. Anything else is copied unchanged.

    Example:

    >>> from keras_transformer.saving.backend_neutral import backend_neutral_config
    >>> written_on_torch = {"module": "keras.src.backend.torch.optimizers.torch_adamw",
    ...                     "class_name": "AdamW", "config": {}, "registered_name": "AdamW"}
    >>> backend_neutral_config(written_on_torch)["module"]
    'keras.optimizers'
    """
    if isinstance(config, list):
        return [backend_neutral_config(item) for item in config]
    if not isinstance(config, dict):
        return config
    neutral = {key: backend_neutral_config(value) for key, value in config.items()}
    if _backend_of(config.get("module")) and _public_optimizer(config.get("class_name")):
        neutral["module"] = "keras.optimizers"
        neutral["registered_name"] = None
    return neutral


def private_backend_classes(config):
    """The classes of a backend's private modules that `config` names, other than the
    optimizers `backend_neutral_config` makes public: `[(module, class_name, backend)]`."""
    found = []

    def visit(value):
        if isinstance(value, list):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            backend = _backend_of(value.get("module"))
            if backend:
                found.append((value["module"], value.get("class_name"), backend))
            for item in value.values():
                visit(item)

    visit(backend_neutral_config(config))
    return found
