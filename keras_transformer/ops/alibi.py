"""ALiBi (Press et al., 2022): attention logits biased by each head's slope times the distance."""

import math

from keras import ops

from keras_transformer.ops.masks import absolute_positions


def alibi_slopes(num_heads):
    r"""The heads' slopes: a geometric sequence, as in Press et al., 2022 (section 3).

    For $n$ heads, a power of two, the slopes are $2^{-8/n}, 2^{-16/n}, \ldots,
    2^{-8}$. For other $n$ the paper takes the $2^k$ slopes of the largest power
    of two below $n$, then every other slope of $2^{k+1}$ heads until there are
    $n$: 6 heads get the 4 slopes $1/4, \ldots, 1/256$, then $1/2$ and $1/8$.

    Args:
        num_heads: positive int.

    Returns:
        A list of `num_heads` Python floats.

    Example:

    >>> alibi_slopes(8)
    [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    >>> alibi_slopes(6)
    [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    """

    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    below = 2 ** int(math.floor(math.log2(num_heads)))
    if below == num_heads:
        return geometric(num_heads)
    return geometric(below) + geometric(2 * below)[0::2][: num_heads - below]


def alibi_bias(num_heads, query_length, key_length, start_index=0):
    r"""The additive logit bias $-m_h \left| i - j \right|$, float32, `(1, num_heads, T, S)`.

    Head $h$ has the slope $m_h$ of
    [`alibi_slopes`][keras_transformer.ops.alibi_slopes]. Query `t` sits at
    absolute position $i$ = `start_index + t` and key `j` at $j$, so a cached
    decoding step gets the bias its row has in a full pass. In causal attention
    only keys $j \le i$ are visible and the bias is the paper's $-m_h\,(i - j)$;
    without a causal mask the same distance penalty applies
    to keys on both sides (the symmetric form used for encoders). Add it to the
    scaled logits before the softmax; it composes with any boolean mask.

    Args:
        num_heads: int, the number of query heads.
        query_length: int or scalar tensor.
        key_length: int or scalar tensor.
        start_index: int or scalar int tensor, the position of the first query.
            Defaults to `0`.

    Returns:
        A float32 tensor `(1, num_heads, query_length, key_length)`.

    Example:

    >>> bias = alibi_bias(2, 3, 3)
    >>> ops.convert_to_numpy(bias[0, 0]).tolist()  # slope 1/16
    [[-0.0, -0.0625, -0.125], [-0.0625, -0.0, -0.0625], [-0.125, -0.0625, -0.0]]

    References:
        - [Press et al., 2022](https://arxiv.org/abs/2108.12409) (ALiBi)
    """
    queries, keys = absolute_positions(query_length, key_length, start_index)
    distance = ops.cast(ops.abs(queries - keys), "float32")
    slopes = ops.convert_to_tensor(alibi_slopes(num_heads), dtype="float32")
    return -slopes[None, :, None, None] * distance[None, None, :, :]
