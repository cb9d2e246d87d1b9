"""Inverted dropout from 16 random bits per element."""

import keras
from keras import ops

from keras_transformer.ops.backend_paths import dropout_draws_bit_pairs

# Keeping an element when its 16 random bits reach `round(rate * 2**16)` realises `rate`
# to within 2**-17 (0.2 becomes 0.199997).
_LEVELS = 1 << 16


def dropout(x, rate, seed=None):
    """Zeroes each element of `x` with probability `rate`, scaling the rest by `1 / (1 - rate)`.

    The same as `keras.random.dropout` in distribution, drawn differently on
    TensorFlow: one 32-bit random integer serves two elements (16 bits each),
    where TensorFlow's own dropout draws a uniform number of `x`'s dtype per
    element, which is slow in bfloat16 on a CPU. Other backends use
    `keras.random.dropout`, which their compilers fuse.

    Args:
        x: float tensor.
        rate: float in `[0, 1)`, the probability of dropping an element.
        seed: a `keras.random.SeedGenerator`, an int, or `None`.

    Returns:
        A tensor of `x`'s shape and dtype.

    Example:

    >>> x = keras.ops.ones((2, 1000))
    >>> y = dropout(x, 0.2, seed=1)
    >>> abs(float(keras.ops.mean(keras.ops.cast(y == 0, "float32"))) - 0.2) < 0.05
    True
    """
    if not 0 <= rate < 1:
        raise ValueError(
            f"`rate` must be in [0, 1). Received: rate={rate!r}. Use 0 to keep every element."
        )
    if rate == 0:
        return x
    if not dropout_draws_bit_pairs() or len(x.shape) == 0:
        return keras.random.dropout(x, rate, seed=seed)
    shape = ops.shape(x)
    last = x.shape[-1] if x.shape[-1] is not None else shape[-1]
    half = (last + 1) // 2
    bits = keras.random.randint(
        tuple(shape[:-1]) + (half,), -(2**31), 2**31 - 1, dtype="int32", seed=seed
    )
    threshold = round(rate * _LEVELS)
    # The low 16 bits, and the high 16 bits as a signed number in [-2**15, 2**15).
    keep = ops.concatenate(
        [
            ops.bitwise_and(bits, _LEVELS - 1) >= threshold,
            ops.right_shift(bits, 16) >= threshold - _LEVELS // 2,
        ],
        axis=-1,
    )
    if not isinstance(last, int) or last % 2:
        keep = keep[..., :last]
    # One select of the scale or zero, then one product: two passes over `x`'s size, not three.
    scale = ops.cast(1.0 / (1.0 - rate), x.dtype)
    return x * ops.where(keep, scale, ops.zeros((), x.dtype))
