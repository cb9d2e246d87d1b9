"""Compilation: length buckets, no retracing, and the current weights on every call."""

import keras
import numpy as np
import pytest
from generation_helpers import END, SOURCES, START, pad_rows, strip, uncached_greedy_seq2seq

from keras_transformer.generation import bucket_length, trace_count

pytestmark = pytest.mark.backend_agnostic


def greedy(model, sources, max_length=12):
    return model.generate(
        sources, max_length=max_length, method="greedy", start_id=START, end_id=END
    )


def test_bucket_length():
    assert [bucket_length(n) for n in (1, 8, 9, 12, 13, 17, 25, 33, 65, 80, 81, 129)] == [
        8, 8, 12, 12, 16, 24, 32, 48, 80, 80, 96, 160
    ]  # fmt: skip
    assert bucket_length(81, maximum=64) == 64


def test_second_call_in_the_same_bucket_does_not_retrace(seq2seq_model):
    greedy(seq2seq_model, pad_rows(SOURCES))
    traced = trace_count(seq2seq_model)
    if keras.backend.backend() in ("tensorflow", "jax"):
        assert traced >= 1  # the counter counts (this configuration was traced at some point)
    else:
        assert traced == 0  # PyTorch generates eagerly: nothing is traced, nothing retraced
    # Other source widths (2 and 8 -> bucket 8, like 7) and other max_lengths with
    # the same cache bucket (9 .. 12 -> 12) reuse the program.
    greedy(seq2seq_model, pad_rows(SOURCES, width=8), max_length=9)
    greedy(seq2seq_model, pad_rows([s[:2] for s in SOURCES]), max_length=11)
    assert trace_count(seq2seq_model) == traced


def test_compiled_generation_reads_the_current_weights(seq2seq_model):
    # A jitted function that captured the weights as constants at trace time would
    # keep generating with the old weights after `set_weights`.
    sources = pad_rows(SOURCES)
    before = greedy(seq2seq_model, sources)
    original = seq2seq_model.get_weights()
    traced = trace_count(seq2seq_model)
    rng = np.random.default_rng(0)
    try:
        seq2seq_model.set_weights(
            [w + rng.normal(0.0, 0.5, w.shape).astype(w.dtype) for w in original]
        )
        after = greedy(seq2seq_model, sources)
        assert trace_count(seq2seq_model) == traced  # same program, new weights
        expected = [uncached_greedy_seq2seq(seq2seq_model, s, 12)[0] for s in SOURCES]
        assert [strip(row) for row in after] == expected
        assert [strip(row) for row in before] != expected
    finally:
        seq2seq_model.set_weights(original)
