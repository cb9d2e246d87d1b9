"""Ratios of two contenders measured round by round, with their spread over the rounds.

The benchmarks time their contenders back to back within each round, so a slow spell of
the machine (another job, a neighbour on the host) slows both sides of a round alike. The
median of the rounds' ratios then moves less from one run to the next than the ratio of
the two sides' medians, and the lowest and highest round show how far one run can land.
"""

import math
import statistics


def paired_ratios(numerators, denominators):
    """`(median, lowest, highest)` of `numerators[i] / denominators[i]` over the rounds.

    Args:
        numerators: per-round figures of one contender, or `None`.
        denominators: the other contender's figures for the same rounds, or `None`.

    Returns:
        A tuple of three floats; `(nan, nan, nan)` when either side is `None` (a
        contender that was not run).

    Example:

    >>> paired_ratios([2.0, 3.0, 4.0], [1.0, 2.0, 2.0])
    (2.0, 1.5, 2.0)
    """
    if numerators is None or denominators is None:
        return (math.nan,) * 3
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError(
            f"`numerators` and `denominators` must be the same rounds; got {len(numerators)} "
            f"and {len(denominators)} figures."
        )
    ratios = [mine / theirs for mine, theirs in zip(numerators, denominators)]
    return statistics.median(ratios), min(ratios), max(ratios)


def format_spread(ratio, digits=2):
    """`"1.23 (1.20-1.31)"`: the median, then the lowest and highest round."""
    middle, low, high = ratio
    return f"{middle:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"
