import keras
from keras import ops

from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionEmbedding(keras.layers.Layer):
    """Learned position embeddings, the alternative the paper compares in Table 3 (E).

    One trainable vector per position up to `sequence_length`, returned for
    the input's positions and broadcast to the input's shape. The table is a
    float32 variable, cast to the compute dtype at the end.

    Args:
        sequence_length: int, the longest sequence the table covers.
        initializer: initializer for the table. Defaults to `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, length, width)`, e.g. token embeddings.
        start_index: int or scalar tensor, position of the first step.
            Defaults to `0`.

    Example:

    >>> embeddings = keras.random.normal((2, 10, 16))
    >>> tuple(PositionEmbedding(sequence_length=32)(embeddings).shape)
    (2, 10, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.5
        - [Gehring et al., 2017](https://arxiv.org/abs/1705.03122)
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("sequence_length", sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        if len(inputs_shape) < 2:
            raise ValueError(
                "`inputs` must have rank 3, `(batch, length, width)`. "
                f"Received: inputs.shape={tuple(inputs_shape)}."
            )
        self._check_length(inputs_shape[-2])
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, inputs_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    def _check_length(self, length, start_index=0):
        if isinstance(length, int) and isinstance(start_index, int):
            if start_index + length > self.sequence_length:
                raise ValueError(
                    f"The input covers positions {start_index}..{start_index + length - 1}, but "
                    f"this PositionEmbedding only has `sequence_length={self.sequence_length}` "
                    "positions. Truncate the input or build the layer with a larger "
                    "`sequence_length`."
                )

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length = shape[-2]
        self._check_length(inputs.shape[-2], start_index)
        table = ops.convert_to_tensor(self.position_embeddings)
        positions = ops.slice(table, (start_index, 0), (length, table.shape[-1]))
        return ops.broadcast_to(ops.cast(positions, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
