"""What the encoder and decoder stacks share: N identical blocks, then (pre-norm) a layer norm."""

import inspect

import keras
from keras import ops

from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.validation import check_positive_int


class TransformerStackBase(SublayerQuantization, keras.layers.Layer):
    """Base of `TransformerEncoder` and `TransformerDecoder` (not public).

    Subclasses set `block_class`. Every constructor argument other than
    `num_layers`, `rematerialize` and the base layer arguments is forwarded to
    each block.
    """

    block_class = None

    def __init__(self, num_layers, num_heads, intermediate_dim, rematerialize=False, **kwargs):
        block_args = set(inspect.signature(self.block_class.__init__).parameters)
        block_args |= set(inspect.signature(self.block_class.__mro__[1].__init__).parameters)
        block_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in block_args}
        super().__init__(**kwargs)
        check_positive_int("num_layers", num_layers)
        if not isinstance(rematerialize, bool):
            raise ValueError(
                "`rematerialize` must be True or False (recompute each block's "
                f"activations in the backward pass). Received: rematerialize={rematerialize!r}"
            )
        self.num_layers = num_layers
        self.rematerialize = rematerialize
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

    def _call_block(self, block, inputs, tensors, **static):
        """`block(inputs, **tensors, **static)`, under `keras.remat` when rematerializing.

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
        if not self.rematerialize or static.get("training") is not True:
            # Only training calls keep activations for a backward pass; inference
            # (predict, generate, export) runs as usual.
            return block(inputs, **tensors, **static)
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

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "rematerialize": self.rematerialize,
                **self._block_config,
            }
        )
        return config
