"""Rotary position embedding (Su et al., 2021): queries and keys rotated by their position."""

from keras import ops


def rotary_angles(positions, dim, max_wavelength=10000):
    r"""The rotation angles $m\,\theta_i$ of positions $m$, float32, `(length, dim // 2)`.

    Pair $i$ of the features turns by $m\,\theta_i$ at position $m$, with
    $\theta_i = w^{-2i/d}$ ($w$ = `max_wavelength`, $d$ = `dim`), the frequencies of the paper's
    sinusoidal table (Vaswani et al., 2017, section 3.5). Computed in float32
    whatever the model's dtype: in 16 bits the angles of positions in the
    thousands would lose their fractional part.

    Args:
        positions: int or float tensor `(length,)`, the absolute positions.
        dim: even int, the head size.
        max_wavelength: float, the longest wavelength. Defaults to `10000`.

    Returns:
        A float32 tensor `(length, dim // 2)`.

    Example:

    >>> angles = rotary_angles(ops.arange(3), dim=4)
    >>> [[round(float(a), 4) for a in row] for row in ops.convert_to_numpy(angles)]
    [[0.0, 0.0], [1.0, 0.01], [2.0, 0.02]]
    """
    exponents = ops.arange(0, dim, 2, dtype="float32") / dim
    inverse_frequencies = 1.0 / ops.power(float(max_wavelength), exponents)
    positions = ops.cast(positions, "float32")
    return positions[:, None] * inverse_frequencies[None, :]


def apply_rotary_embedding(x, start_index=0, max_wavelength=10000):
    r"""Rotates each head of `x` by its position: $x$ at position $m$ becomes $R(m\theta)\,x$.

    Feature $i$ of the first half pairs with feature $i$ of the second half
    (the layout of GPT-NeoX and keras-hub's `RotaryEmbedding`); each pair turns
    by the angle $m\,\theta_i$ (see
    [`rotary_angles`][keras_transformer.ops.rotary_angles]). Su et al. pair
    neighbouring features instead, which is the same rotation with the features
    listed in another order, so a projection learns either equally. Because a
    rotation by $m\theta$ followed by the transpose of one by $n\theta$ is a
    rotation by $(m - n)\theta$, the dot product of a rotated query and a rotated
    key depends on their positions only through the offset $m - n$.

    Args:
        x: tensor `(batch, length, heads, dim)`, `dim` even.
        start_index: int or scalar int tensor, the position of `x[:, 0]` (the
            decoding step when a cache is used). Defaults to `0`.
        max_wavelength: float, the longest wavelength. Defaults to `10000`.

    Returns:
        A tensor of the shape and dtype of `x`. The angles, their cosines and
        sines are float32, then cast to `x`'s dtype.

    Example:

    The score of a rotated query and key depends only on their distance (2 in both
    calls):

    >>> import numpy as np
    >>> q = ops.convert_to_tensor(np.ones((1, 1, 1, 4), "float32"))
    >>> def score(m, n):
    ...     rotated_q = apply_rotary_embedding(q, start_index=m)
    ...     rotated_k = apply_rotary_embedding(q, start_index=n)
    ...     return round(float(ops.sum(rotated_q * rotated_k)), 4)
    >>> score(3, 1), score(12, 10)
    (1.1673, 1.1673)

    References:
        - [Su et al., 2021](https://arxiv.org/abs/2104.09864) (RoFormer)
    """
    dim = x.shape[-1]
    if dim is None or dim % 2:
        raise ValueError(
            "Rotary position embedding turns pairs of features, so the head size (last "
            f"axis) must be even. Received: x.shape={tuple(x.shape)}. Use an even `key_dim`."
        )
    length = ops.shape(x)[1]
    positions = ops.arange(length, dtype="int32") + ops.cast(start_index, "int32")
    angles = rotary_angles(positions, dim, max_wavelength)[None, :, None, :]
    cos = ops.cast(ops.cos(angles), x.dtype)
    sin = ops.cast(ops.sin(angles), x.dtype)
    first, second = ops.split(x, 2, axis=-1)
    return ops.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
