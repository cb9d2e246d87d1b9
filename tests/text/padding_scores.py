"""The check that the rows a fixed-shape batch is completed with are not scored."""

import itertools

import pytest


def assert_scored_as_without_padding(model, batches, count=2):
    """Each batch scores the loss and accuracy of the same examples without its padding.

    Args:
        model: a compiled model with an `accuracy` metric.
        batches: pairs `(padded, plain)` of `test_on_batch` arguments: a batch holding rows
            (or columns) of padding, and its real examples alone. The first `count` are
            checked; there must be as many.
        count: how many batches to check.
    """
    checked = list(itertools.islice(batches, count))
    assert len(checked) == count, f"{len(checked)} batches with padding, expected {count}"
    for padded, plain in checked:
        scores = []
        for arguments in (padded, plain):
            model.reset_metrics()
            scores.append(model.test_on_batch(*arguments, return_dict=True))
        # Float32 sums over other shapes: equal to rounding; a counted row would move them ~1%.
        padded_scores, plain_scores = scores
        for name in ("loss", "accuracy"):
            assert padded_scores[name] == pytest.approx(plain_scores[name], rel=1e-6), scores
