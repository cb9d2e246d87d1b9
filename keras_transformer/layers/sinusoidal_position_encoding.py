import keras
from keras import ops

from keras_transformer.validation import check_bool, check_rank, is_real


def sinusoidal_table(length, width, max_wavelength=10000.0, start_index=0, interleave=True):
    """The paper's position table, `(length, width)`, in float32.

    `PE[pos, 2i] = sin(pos / max_wavelength^(2i/width))` and
    `PE[pos, 2i+1] = cos(pos / max_wavelength^(2i/width))`; with `interleave=False`
    the same sines fill the first `ceil(width / 2)` columns and the cosines the rest.
    """
    positions = ops.cast(ops.arange(length), "float32") + ops.cast(start_index, "float32")
    dims = ops.arange(width)
    if interleave:
        frequency_index = dims // 2
        is_sine = ops.equal(dims % 2, 0)
    else:
        sines = (width + 1) // 2
        is_sine = ops.less(dims, sines)
        frequency_index = ops.where(is_sine, dims, dims - sines)
    exponents = ops.cast(2 * frequency_index, "float32") / float(width)
    # Angles in float32 stay within a few 1e-5 radians at position ~1000; in a 16-bit
    # compute dtype they would be off by whole radians (keras-hub: errors up to 1.99).
    inverse_frequencies = ops.power(float(max_wavelength), -exponents)
    angles = positions[:, None] * inverse_frequencies[None, :]
    return ops.where(is_sine[None, :], ops.sin(angles), ops.cos(angles))


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionEncoding(keras.layers.Layer):
    r"""The fixed sinusoidal position encoding of the paper (section 3.5).

    Returns the table

    $$
    \mathit{PE}_{(pos, 2i)} = \sin\left(pos / 10000^{2i/d}\right), \qquad
    \mathit{PE}_{(pos, 2i+1)} = \cos\left(pos / 10000^{2i/d}\right)
    $$

    for the positions $pos$ of the input ($d$ its width, 10000 the
    `max_wavelength`), broadcast to the input's shape, to be added to the
    embeddings. The table is
    computed in float32 and cast to the compute dtype at the end, so it stays
    accurate under `mixed_float16` and `mixed_bfloat16`. It has no weights and
    works for any length.

    Args:
        max_wavelength: float, the longest wavelength, `10000` in the paper.
            Defaults to `10000`.
        interleave: bool, sines at even and cosines at odd columns, as the
            paper writes the formula. `False` puts the same sines in the first
            half of the vector and the cosines in the second, as tensor2tensor
            and Marian (the Hugging Face opus-mt models) lay them out.
            Defaults to `True`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, length, width)` (or `(length, width)`), e.g.
            the token embeddings.
        start_index: int or scalar tensor, position of the first step (for
            incremental decoding). Defaults to `0`.

    Example:

    >>> embeddings = keras.random.normal((2, 10, 16))
    >>> outputs = embeddings + SinusoidalPositionEncoding()(embeddings)
    >>> tuple(outputs.shape)
    (2, 10, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.5
    """

    def __init__(self, max_wavelength=10000, interleave=True, **kwargs):
        super().__init__(**kwargs)
        if not is_real(max_wavelength):
            raise ValueError(
                f"`max_wavelength` must be a positive number. Received: {max_wavelength!r}."
            )
        if max_wavelength <= 1:
            raise ValueError(
                f"`max_wavelength` must be greater than 1. Received: {max_wavelength!r}."
            )
        check_bool("interleave", interleave, " (sin, cos, sin, ... or sines, then cosines)")
        self.max_wavelength = max_wavelength
        self.interleave = interleave
        self.supports_masking = True
        self.built = True

    def call(self, inputs, start_index=0):
        if len(inputs.shape) not in (2, 3):
            check_rank("inputs", inputs.shape, 3, "`(batch, length, width)`")
        shape = ops.shape(inputs)
        width = inputs.shape[-1]
        table = sinusoidal_table(
            shape[-2], width, self.max_wavelength, start_index, self.interleave
        )
        return ops.broadcast_to(ops.cast(table, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config["max_wavelength"] = self.max_wavelength
        config["interleave"] = self.interleave
        return config
