"""What the Transformer models share: padding masks, float32 logits, build-on-construct."""

import keras
from keras import ops

from keras_transformer.layers.validation import check_positive_int


class TransformerModelBase(keras.Model):
    """Base of the models (not public).

    Subclasses create their layers in `__init__` and build them in `_build_layers`, so
    a model has its weights as soon as it exists (like a functional model): saving,
    loading and weight transfer never depend on a first call.
    """

    def __init__(self, pad_id=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0:
            raise ValueError(
                f"`pad_id` must be a non-negative integer token id. Received: pad_id={pad_id!r}."
            )
        self.pad_id = pad_id

    def padding_mask(self, token_ids):
        """`True` at real tokens, `False` at `pad_id`."""
        return ops.not_equal(token_ids, ops.cast(self.pad_id, token_ids.dtype))

    @staticmethod
    def float32_logits(logits):
        # Softmax and the loss need float32 even when the model computes in 16 bits.
        return ops.cast(logits, "float32")

    def build(self, *args, **kwargs):
        if not self.built:
            self._build_layers()
            self.built = True

    def get_build_config(self):
        return {}

    def build_from_config(self, config):
        self.build()

    @staticmethod
    def _check_dims(**dims):
        for name, value in dims.items():
            check_positive_int(name, value)

    @classmethod
    def from_config(cls, config):
        return cls(**config)
