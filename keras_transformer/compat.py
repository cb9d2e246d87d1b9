"""The few things Keras and tensorflow-text offer no public API for, in one place.

Each function here reaches into a private module or attribute because nothing
public does the job; each says why, and has a fallback if the private name
goes away. `tests/test_compat.py` fails loudly when a fallback is taken, so a
Keras or tensorflow-text release that moves one is noticed at once rather than
silently degrading. Nothing else in the package may import private modules
(`tests/test_package_structure.py` checks).
"""

try:  # Keras keeps masks in a side table for tensors that take no attributes (JAX arrays).
    from keras.src.backend import get_keras_mask as _get_keras_mask
    from keras.src.backend import set_keras_mask as _set_keras_mask
except ImportError:  # pragma: no cover - a Keras release that moved the helpers
    _get_keras_mask = _set_keras_mask = None


def keras_mask_helpers_found():
    """Whether Keras's own mask helpers were found (else attributes are used)."""
    return _get_keras_mask is not None and _set_keras_mask is not None


def get_keras_mask(x):
    """The Keras mask attached to `x` by a previous layer, or `None`.

    Keras 3 has no public accessor: `keras.layers.Embedding(mask_zero=True)`
    attaches its mask with a private helper, as an attribute where the tensor
    takes one and in a side table where it does not (JAX arrays).
    """
    if _get_keras_mask is not None:
        return _get_keras_mask(x)
    return getattr(x, "_keras_mask", None)  # pragma: no cover


def set_keras_mask(x, mask):
    """Attaches `mask` to `x` as Keras would, so that Keras's losses and metrics see it."""
    if _set_keras_mask is not None:
        _set_keras_mask(x, mask)
    else:  # pragma: no cover
        x._keras_mask = mask


def share_sentencepiece_resource(tokenizer, model_proto):
    """Gives a `tf_text.SentencepieceTokenizer` a model resource that outlives `clear_session`.

    tensorflow-text keeps the SentencePiece model in a resource private to the
    op kernel, so `keras.backend.clear_session()` (which clears the kernel
    cache) deletes it, and every later call, including those of a `tf.data`
    pipeline traced before, fails with "Resource ... does not exist". A shared
    name puts the resource in TensorFlow's resource manager, which outlives the
    kernel, and lets tokenizers of the same model share one copy. tensorflow-text
    has no public way to pass that name: this replaces its private resource.

    Args:
        tokenizer: a `tensorflow_text.SentencepieceTokenizer` of `model_proto`.
        model_proto: bytes, the serialized SentencePiece model.

    Returns:
        bool, whether the resource was replaced (`False` when tensorflow-text's
        layout is not the one this was written for; the tokenizer then works
        until the next `clear_session`).
    """
    import hashlib

    import tensorflow as tf

    try:
        from tensorflow_text.python.ops.sentencepiece_tokenizer import (
            gen_sentencepiece_tokenizer,
        )
    except ImportError:  # pragma: no cover - another tensorflow-text layout
        return False
    if not hasattr(tokenizer, "_model_resource"):  # pragma: no cover
        return False
    shared_name = "keras_transformer_subword_" + hashlib.sha256(model_proto).hexdigest()

    class SharedModelResource(tf.saved_model.experimental.TrackableResource):
        def _create_resource(self):
            return gen_sentencepiece_tokenizer.sentencepiece_op(
                model=model_proto, shared_name=shared_name
            )

    resource = SharedModelResource()
    _ = resource.resource_handle
    tokenizer._model_resource = resource
    return True
