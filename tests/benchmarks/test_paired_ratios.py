"""`benchmarks/paired_ratios.py`: per-round ratios, their median and spread."""

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from paired_ratios import format_spread, paired_ratios  # noqa: E402


def test_median_of_round_ratios_not_ratio_of_medians():
    # Rounds 1 and 3 give 2; in round 2 the machine slowed one side only. The rounds'
    # median is 2 with the odd round in the spread; the medians' ratio would be 20 / 15.
    middle, low, high = paired_ratios([10.0, 20.0, 30.0], [5.0, 30.0, 15.0])
    assert middle == 2.0 and high == 2.0
    assert low == pytest.approx(2 / 3)


def test_missing_other_side_and_mismatched_rounds():
    assert all(math.isnan(x) for x in paired_ratios([1.0], None))
    assert all(math.isnan(x) for x in paired_ratios(None, [1.0]))
    with pytest.raises(ValueError, match="same rounds"):
        paired_ratios([1.0, 2.0], [1.0])


def test_format_spread():
    assert format_spread((1.234, 1.2, 1.31)) == "1.23 (1.20-1.31)"
    assert format_spread((1.0333, 1.0101, 1.05), 3) == "1.033 (1.010-1.050)"
