"""What the encoder and decoder blocks share: arguments, residual sub-layers, the FFN."""

import keras

from keras_transformer import sublayer_names as names
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
from keras_transformer.layers.token_and_position_embedding import POSITIONS
from keras_transformer.ops.masks import merge_masks, padding_to_attention_mask
from keras_transformer.validation import check_one_of, check_positive_int, check_rank, check_rate


class TransformerBlockBase(SublayerQuantization, keras.layers.Layer):
    """Base of `TransformerEncoderBlock` and `TransformerDecoderBlock` (not public).

    Each sub-layer (attention or feed-forward) is wrapped in a residual
    connection with dropout and layer normalization: post-norm
    `LayerNorm(x + Dropout(F(x)))` as in the paper (section 3.1 and 5.4), or
    pre-norm `x + Dropout(F(LayerNorm(x)))` with `norm_first=True`.
    """

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
        position=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_one_of("position", position, POSITIONS)
        if position == "alibi" and flash_attention:
            raise ValueError(
                '`position="alibi"` cannot be honoured with `flash_attention=True`: its bias '
                "is added to the logits on the explicit path. Pass `flash_attention=None`."
            )
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("key_dim", key_dim, allow_none=True)
        check_positive_int("num_key_value_heads", num_key_value_heads, allow_none=True)
        check_positive_int("sliding_window", sliding_window, allow_none=True)
        for name, rate in (
            ("dropout", dropout),
            ("attention_dropout", attention_dropout),
            ("activation_dropout", activation_dropout),
        ):
            check_rate(name, rate)
        if not isinstance(layer_norm_epsilon, (int, float)) or layer_norm_epsilon <= 0:
            raise ValueError(
                "`layer_norm_epsilon` must be a positive float. "
                f"Received: layer_norm_epsilon={layer_norm_epsilon!r}."
            )
        if num_key_value_heads is not None and num_heads % num_key_value_heads:
            raise ValueError(
                f"`num_key_value_heads` ({num_key_value_heads}) must divide `num_heads` "
                f"({num_heads}). Pick a divisor of `num_heads`."
            )
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
        self.position = position
        # Handed to every attention and feed-forward projection, not to the block's output.
        self._projection_options = projection_options(locals())
        if flash_attention and attention_dropout > 0:
            raise ValueError(
                f"`flash_attention=True` cannot be honoured with `attention_dropout="
                f"{attention_dropout}`: the flash kernel has no dropout. Pass "
                "`attention_dropout=0.0`, or `flash_attention=None`."
            )
        self.supports_masking = True

    def _check_width(self, hidden_dim):
        if self.key_dim is None and hidden_dim % self.num_heads:
            raise ValueError(
                f"The input width ({hidden_dim}) is not divisible by `num_heads` "
                f"({self.num_heads}). Choose `num_heads` dividing the width, or pass `key_dim`."
            )

    def _attention(self, name, sliding_window=None, position=None):
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            num_key_value_heads=self.num_key_value_heads,
            dropout=self.attention_dropout,
            flash_attention=self.flash_attention,
            sliding_window=sliding_window,
            position=position,
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

    def _build_self_attention(self, inputs_shape):
        """Checks the inputs' shape and builds the self-attention sub-layer."""
        check_rank("inputs", inputs_shape, 3, "`(batch, length, width)`")
        self._check_width(inputs_shape[-1])
        # Absolute positions ("sinusoidal", "learned") were added to the embeddings.
        attention_position = self.position if self.position in ("rotary", "alibi") else None
        self.self_attention = self._attention(
            names.SELF_ATTENTION, self.sliding_window, attention_position
        )
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_layer_norm = self._layer_norm(
            names.SELF_ATTENTION_LAYER_NORM, inputs_shape
        )
        self.self_attention_dropout = self._dropout("self_attention_dropout")

    @staticmethod
    def _attention_mask(padding_mask, attention_mask):
        """One mask from a `(batch, key_length)` padding mask and an attention mask."""
        return merge_masks(
            None if padding_mask is None else padding_to_attention_mask(padding_mask),
            attention_mask,
        )

    def _build_feed_forward(self, inputs_shape):
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

    def _residual(self, x, norm, dropout, sublayer, training):
        """Applies `sublayer` with its residual connection; returns (output, extras).

        `sublayer` returns either a tensor or a tuple whose first item is the
        tensor and the rest (attention scores, caches) are passed through.
        """
        residual = x
        if self.norm_first:
            x = norm(x)
        result = sublayer(x)
        extras = ()
        if isinstance(result, tuple):
            result, extras = result[0], result[1:]
        x = residual + dropout(result, training=training)
        if not self.norm_first:
            x = norm(x)
        return x, extras

    def _feed_forward_residual(self, x, training):
        x, _ = self._residual(
            x,
            self.feed_forward_layer_norm,
            self.feed_forward_dropout,
            lambda h: self.feed_forward(h, training=training),
            training,
        )
        return x

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

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
                "position": self.position,
                **serialize_projection_options(self._projection_options),
            }
        )
        return config
