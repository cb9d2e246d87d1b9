"""The GNMT length penalty that normalises beam-search scores."""

from keras import ops


def gnmt_length_penalty(length, alpha):
    r"""The length penalty $\mathit{lp}(Y) = ((5 + \ell) / 6)^\alpha$ of Wu et al. (2016).

    Beam search ranks finished hypotheses $Y$ of length $\ell$ = `length` by
    $\log P(Y) / \mathit{lp}(Y)$, with $\alpha$ = `alpha`. Log-probabilities only
    fall as a sequence grows, so an unnormalised search prefers short outputs;
    $\alpha > 0$ counteracts that (0.6 in the Transformer paper), and $\alpha = 0$ gives a
    penalty of 1 (plain log-probability).

    Args:
        length: int, float or tensor, the number of generated tokens (this
            library counts every generated token, the end token included, and
            not the start token or a prompt).
        alpha: float or scalar tensor, the strength of the normalisation
            ([`generate`][keras_transformer.models.Seq2SeqTransformer.generate]
            uses `0.6`).

    Returns:
        The penalty, a float32 tensor of the shape of `length`.

    Example:

    >>> from keras_transformer.generation import gnmt_length_penalty
    >>> float(gnmt_length_penalty(1, 0.6))
    1.0
    >>> round(float(gnmt_length_penalty(7, 1.0)), 3)
    2.0

    References:
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 6.1
    """
    length = ops.cast(length, "float32")
    return ops.power((5.0 + length) / 6.0, ops.cast(alpha, "float32"))
