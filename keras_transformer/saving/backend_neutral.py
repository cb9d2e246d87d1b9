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

`compile` also stores its `jit_compile` as resolved on the backend it ran on: `"auto"`
becomes `True` (XLA) on JAX and `False` on PyTorch, where `True` would mean `torch.compile`.
A model built on another backend gets `"auto"` back, that backend's own default.
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


def compiled_for_backend(config, saved_on, backend):
    """`config`, a serialized model, to build on `backend` when `saved_on` wrote it.

    Args:
        config: the JSON-like dict of `keras.saving.serialize_keras_object(model)`.
        saved_on: str, the backend that wrote it, or `None` when unknown.
        backend: str, the backend that builds it.

    Returns:
        `config` itself on the same (or an unknown) backend; on another one, a copy whose
        `compile_config` has `jit_compile="auto"`: the saved value only says how the saving
        backend compiled (XLA on JAX, `torch.compile` on PyTorch).

    Example:

    >>> from keras_transformer.saving.backend_neutral import compiled_for_backend
    >>> written_on_jax = {"class_name": "Model", "compile_config": {"jit_compile": True}}
    >>> compiled_for_backend(written_on_jax, "jax", "torch")["compile_config"]
    {'jit_compile': 'auto'}
    >>> compiled_for_backend(written_on_jax, "jax", "jax")["compile_config"]
    {'jit_compile': True}
    """
    compile_config = config.get("compile_config") if isinstance(config, dict) else None
    if saved_on in (None, backend) or not isinstance(compile_config, dict):
        return config
    if "jit_compile" not in compile_config:
        return config
    return {**config, "compile_config": {**compile_config, "jit_compile": "auto"}}
