import keras

from keras_transformer.ops.dropout import dropout


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` drawing its mask with
    [`keras_transformer.ops.dropout`][].

    Same arguments, masks and serialisation as Keras's layer; on TensorFlow the
    mask costs about a third of Keras's in bfloat16 (see
    `keras_transformer.ops.dropout`). With a `noise_shape` it is Keras's layer.

    Args:
        rate: float in `[0, 1)`, the fraction of the inputs to drop.
        noise_shape: 1D integer tensor, the shape of the binary dropout mask
            broadcast against the inputs. Defaults to `None` (one draw per element).
        seed: int, the random seed. Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Example:

    >>> layer = Dropout(0.5, seed=1)
    >>> tuple(layer(keras.ops.ones((2, 4)), training=False).shape)
    (2, 4)

    References:
        - [Srivastava et al., 2014](https://jmlr.org/papers/v15/srivastava14a.html)
    """

    def call(self, inputs, training=False):
        if training and self.rate > 0 and self.noise_shape is None:
            return dropout(inputs, self.rate, seed=self.seed_generator)
        return super().call(inputs, training=training)
