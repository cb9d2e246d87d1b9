import keras

from keras_transformer import sublayer_names as names
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.projection_options import (
    projection_options,
    serialize_projection_options,
)
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(SublayerQuantization, keras.layers.Layer):
    r"""The position-wise feed-forward network, $\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$.

    Two dense layers applied to each position separately (section 3.3 of the
    paper), with an optional dropout after the activation (fairseq's
    "activation dropout"). The output has the input's width unless
    `output_dim` says otherwise.

    Args:
        intermediate_dim: int, the inner width (`d_ff`, 2048 in the paper).
        activation: activation of the inner layer. Defaults to `"relu"`.
        dropout: float, dropout rate after the activation. Defaults to `0.0`.
        output_dim: int, the output width. Defaults to the input width.
        use_bias: bool, whether the dense layers have biases. Defaults to `True`.
        kernel_initializer: initializer for the kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer for the biases. Defaults to `"zeros"`.
        kernel_regularizer: regularizer for both kernels. Defaults to `None`.
        bias_regularizer: regularizer for both biases. Defaults to `None`.
        activity_regularizer: regularizer for each dense layer's output (two
            losses). Defaults to `None`.
        kernel_constraint: constraint for both kernels. Defaults to `None`.
        bias_constraint: constraint for both biases. Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> x = keras.random.normal((2, 5, 16))
    >>> tuple(FeedForward(intermediate_dim=64)(x).shape)
    (2, 5, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.3
    """

    def __init__(
        self,
        intermediate_dim,
        activation="relu",
        dropout=0.0,
        output_dim=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("output_dim", output_dim, allow_none=True)
        check_rate("dropout", dropout)
        self.intermediate_dim = intermediate_dim
        self.activation = keras.activations.get(activation)
        self.dropout = dropout
        self.output_dim = output_dim
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        # Not the base layer's `activity_regularizer`: that one would see the output only.
        self._projection_options = projection_options(locals())
        self.supports_masking = True

    def build(self, inputs_shape):
        common = dict(
            use_bias=self.use_bias,
            dtype=self.dtype_policy,
            **self._projection_options,
        )
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name=names.INTERMEDIATE_DENSE,
            **common,
        )
        self.intermediate_dense.build(inputs_shape)
        self.activation_dropout = Dropout(
            self.dropout, dtype=self.dtype_policy, name="activation_dropout"
        )
        self.output_dense = keras.layers.Dense(
            self.output_dim or inputs_shape[-1],
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name=names.OUTPUT_DENSE,
            **common,
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, inputs, training=None):
        x = self.intermediate_dense(inputs)
        x = self.activation_dropout(x, training=training)
        return self.output_dense(x)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.output_dim or inputs_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": keras.activations.serialize(self.activation),
                "dropout": self.dropout,
                "output_dim": self.output_dim,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                **serialize_projection_options(self._projection_options),
            }
        )
        return config
