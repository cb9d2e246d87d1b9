"""What the encoder and decoder stacks share: N identical blocks, then (pre-norm) a layer norm."""

import inspect

import keras

from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.layers.validation import check_positive_int


class TransformerStackBase(SublayerQuantization, keras.layers.Layer):
    """Base of `TransformerEncoder` and `TransformerDecoder` (not public).

    Subclasses set `block_class`. Every constructor argument other than
    `num_layers` and the base layer arguments is forwarded to each block.
    """

    block_class = None

    def __init__(self, num_layers, num_heads, intermediate_dim, **kwargs):
        block_args = set(inspect.signature(self.block_class.__init__).parameters)
        block_args |= set(inspect.signature(self.block_class.__mro__[1].__init__).parameters)
        block_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in block_args}
        super().__init__(**kwargs)
        check_positive_int("num_layers", num_layers)
        self.num_layers = num_layers
        # Building one block validates every block argument now, not at first call.
        self._block_config = self.block_class(
            num_heads, intermediate_dim, **block_kwargs
        ).get_config()
        for key in ("name", "trainable", "dtype"):
            self._block_config.pop(key, None)
        self.norm_first = self._block_config["norm_first"]
        self.num_heads = num_heads
        self.supports_masking = True

    def _build_blocks(self, inputs_shape, *other_shapes):
        self.blocks = []
        for i in range(self.num_layers):
            block = self.block_class.from_config(
                {**self._block_config, "name": f"block_{i}", "dtype": self.dtype_policy}
            )
            block.build(inputs_shape, *other_shapes)
            self.blocks.append(block)
        self.final_layer_norm = None
        if self.norm_first:
            # Pre-norm leaves the residual stream unnormalized; the stack normalizes it once.
            self.final_layer_norm = LayerNormalization(
                epsilon=self._block_config["layer_norm_epsilon"],
                dtype=self.dtype_policy,
                name="final_layer_norm",
            )
            self.final_layer_norm.build(inputs_shape)
        self.built = True

    def _finish(self, x):
        return x if self.final_layer_norm is None else self.final_layer_norm(x)

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self._block_config})
        return config
