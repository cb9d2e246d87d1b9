"""What the encoder and decoder blocks share: arguments, sub-layers, config."""

import keras

from keras_transformer import sublayer_names as names
from keras_transformer.layers.attention_checks import (
    check_attention_arguments,
    reject_position,
    renamed_position,
)
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.projection_options import (
    projection_options,
    serialize_projection_options,
)
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.validation import check_positive_int, check_rank, check_rate


class TransformerBlockBase(SublayerQuantization, keras.layers.Layer):
    """Base of `TransformerEncoderBlock` and `TransformerDecoderBlock` (not public).

    Holds what the two blocks share: their arguments (checked here, once, where a
    user passes them), the sub-layers `build` creates from them, and the config.
    Each block's `call` is written out in its own file.
    """

    has_cross_attention = False

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        key_dim=None,
        num_key_value_heads=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        flash_attention=None,
        sliding_window=None,
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        relative_position=None,
        **kwargs,
    ):
        reject_position(kwargs, type(self).__name__)
        super().__init__(**kwargs)
        check_block_arguments(locals())
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.activation = keras.activations.get(activation)
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.key_dim = key_dim
        self.num_key_value_heads = num_key_value_heads
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.flash_attention = flash_attention
        self.sliding_window = sliding_window
        self.relative_position = relative_position
        # Handed to every attention and feed-forward projection, not to the block's output.
        self._projection_options = projection_options(locals())
        self.supports_masking = True

    def build(self, inputs_shape, encoder_outputs_shape=None):
        # The sub-layers are made here, in this order, so that a seeded model draws the
        # same initial weights as before (each unseeded initializer draws its seed when
        # it is created).
        check_rank("inputs", inputs_shape, 3, "`(batch, length, width)`")
        self.self_attention = self._attention(
            names.SELF_ATTENTION, self.sliding_window, self.relative_position
        )
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_layer_norm = self._layer_norm(
            names.SELF_ATTENTION_LAYER_NORM, inputs_shape
        )
        self.self_attention_dropout = self._dropout("self_attention_dropout")
        if self.has_cross_attention:
            self.cross_attention_layer = self._attention(names.CROSS_ATTENTION)
            self.cross_attention_layer.build(inputs_shape, encoder_outputs_shape or inputs_shape)
            self.cross_attention_layer_norm = self._layer_norm(
                names.CROSS_ATTENTION_LAYER_NORM, inputs_shape
            )
            self.cross_attention_dropout = self._dropout("cross_attention_dropout")
        self.feed_forward = FeedForward(
            self.intermediate_dim,
            activation=self.activation,
            dropout=self.activation_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=names.FEED_FORWARD,
            **self._projection_options,
        )
        self.feed_forward.build(inputs_shape)
        self.feed_forward_layer_norm = self._layer_norm(names.FEED_FORWARD_LAYER_NORM, inputs_shape)
        self.feed_forward_dropout = self._dropout("feed_forward_dropout")
        self.built = True

    def _attention(self, name, sliding_window=None, relative_position=None):
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            num_key_value_heads=self.num_key_value_heads,
            dropout=self.attention_dropout,
            flash_attention=self.flash_attention,
            sliding_window=sliding_window,
            relative_position=relative_position,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
            **self._projection_options,
        )

    def _layer_norm(self, name, inputs_shape):
        layer = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        layer.build(inputs_shape)
        return layer

    def _dropout(self, name):
        return Dropout(self.dropout, dtype=self.dtype_policy, name=name)

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    @classmethod
    def from_config(cls, config):
        return super().from_config(renamed_position(config))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "activation": keras.activations.serialize(self.activation),
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "key_dim": self.key_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "flash_attention": self.flash_attention,
                "sliding_window": self.sliding_window,
                "relative_position": self.relative_position,
                **serialize_projection_options(self._projection_options),
            }
        )
        return config


def check_block_arguments(arguments):
    """Raises a `ValueError` naming the argument and the fix; run by blocks and stacks.

    `arguments` maps the block arguments' names to their values (a constructor's
    `locals()`, or a stack's arguments for its blocks).
    """
    check_attention_arguments(
        arguments["num_heads"],
        key_dim=arguments["key_dim"],
        num_key_value_heads=arguments["num_key_value_heads"],
        sliding_window=arguments["sliding_window"],
        dropout=arguments["attention_dropout"],
        flash_attention=arguments["flash_attention"],
        relative_position=arguments["relative_position"],
        dropout_name="attention_dropout",
    )
    check_positive_int("intermediate_dim", arguments["intermediate_dim"])
    check_rate("dropout", arguments["dropout"])
    check_rate("activation_dropout", arguments["activation_dropout"])
    epsilon = arguments["layer_norm_epsilon"]
    if not isinstance(epsilon, (int, float)) or epsilon <= 0:
        raise ValueError(
            "`layer_norm_epsilon` must be a positive float. "
            f"Received: layer_norm_epsilon={epsilon!r}."
        )
