"""What the encoder and decoder stacks share: N identical blocks, then (pre-norm) a layer norm."""

import keras
from keras import ops

from keras_transformer.layers.attention_checks import reject_position, renamed_position
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.projection_options import (
    projection_options,
    serialize_projection_options,
)
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.layers.transformer_block_base import check_block_arguments
from keras_transformer.validation import check_bool, check_positive_int


class TransformerStackBase(SublayerQuantization, keras.layers.Layer):
    """Base of `TransformerEncoder` and `TransformerDecoder` (not public).

    Subclasses set `block_class`. The block arguments are those of
    `TransformerEncoderBlock`, handed to each of the `num_layers` blocks, which
    the constructor creates (so a bad argument raises there).
    """

    block_class = None

    def __init__(
        self,
        num_layers,
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
        rematerialize=False,
        **kwargs,
    ):
        reject_position(kwargs, type(self).__name__)
        self._block_specific = self._block_specific_arguments(kwargs)
        super().__init__(**kwargs)
        check_positive_int("num_layers", num_layers)
        check_bool(
            "rematerialize",
            rematerialize,
            " (recompute each block's activations in the backward pass)",
        )
        self.num_layers = num_layers
        self.rematerialize = rematerialize
        self.num_heads = num_heads
        self.norm_first = norm_first
        self.supports_masking = True
        # Every block gets these (the initializers as configs, so that each block has
        # its own instances).
        self._block_args = dict(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=keras.activations.serialize(keras.activations.get(activation)),
            norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            key_dim=key_dim,
            num_key_value_heads=num_key_value_heads,
            kernel_initializer=keras.initializers.serialize(
                keras.initializers.get(kernel_initializer)
            ),
            bias_initializer=keras.initializers.serialize(keras.initializers.get(bias_initializer)),
            flash_attention=flash_attention,
            sliding_window=sliding_window,
            **serialize_projection_options(projection_options(locals())),
            relative_position=relative_position,
            **self._block_specific,
        )
        check_block_arguments(self._block_args)

    def _block_specific_arguments(self, kwargs):
        """Pops the arguments only this stack's blocks take from `kwargs`."""
        return {}

    def build(self, inputs_shape, *other_shapes):
        self.blocks = []
        for i in range(self.num_layers):
            block = self.block_class(**self._block_args, dtype=self.dtype_policy, name=f"block_{i}")
            block.build(inputs_shape, *other_shapes)
            self.blocks.append(block)
        self.final_layer_norm = None
        if self.norm_first:
            # Pre-norm leaves the residual stream unnormalized; the stack normalizes it once.
            self.final_layer_norm = LayerNormalization(
                epsilon=self._block_args["layer_norm_epsilon"],
                dtype=self.dtype_policy,
                name="final_layer_norm",
            )
            self.final_layer_norm.build(inputs_shape)
        self.built = True

    def _rematerialized_block(self, block, inputs, tensors, **static):
        """`block(inputs, **tensors, **static)` under `keras.remat`.

        `tensors` are tensor arguments (or `None`); `static` Python values. Keras's
        own `RematScope` hands every argument to the backend's checkpoint
        (`jax.checkpoint`, `tf.recompute_grad`), which turns `training` into a
        traced value on JAX and refuses keyword arguments in a TensorFlow graph.
        Here only the float tensors go through it, positionally; masks (whose
        gradient TensorFlow's checkpoint cannot build) and Python values are
        closed over.

        Dropout advances its seed generators' state during the call, and the
        backward pass runs the call again: the state is copied before, set from
        the copy at the start of each run (so the rerun draws the same masks),
        and the advanced state comes back as an output and is assigned outside
        (an assignment made inside `jax.checkpoint` would hold one of its tracers).
        """
        floats = [
            name
            for name, value in tensors.items()
            if value is not None and keras.backend.is_float_dtype(value.dtype)
        ]
        closed = {name: value for name, value in tensors.items() if name not in floats}
        # The dropout layers' `keras.random.SeedGenerator` states, the only state a
        # block's call changes. Copies: PyTorch's checkpoint keeps its tensors by
        # reference and refuses ones changed in place since.
        states = [v for v in block.non_trainable_variables if v.name == "seed_generator_state"]
        saved = [ops.copy(v.value) for v in states]

        def run(x, *float_tensors):
            for variable, value in zip(states, saved):
                variable.assign(value)
            outputs = block(x, **dict(zip(floats, float_tensors)), **closed, **static)
            return outputs, [ops.copy(v.value) for v in states]

        outputs, new_states = keras.remat(run)(inputs, *[tensors[name] for name in floats])
        for variable, value in zip(states, new_states):
            variable.assign(value)
        return outputs

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    @classmethod
    def from_config(cls, config):
        return super().from_config(renamed_position(config))

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_layers": self.num_layers, "rematerialize": self.rematerialize, **self._block_args}
        )
        return config
