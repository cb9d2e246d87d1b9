"""`generate` rejects bad arguments with errors that name them (before any compilation)."""

import numpy as np
import pytest
from generation_helpers import END, SOURCES, START, pad_rows

pytestmark = pytest.mark.backend_agnostic


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"method": "sample"}, "`method` must be one of"),
        ({"beam_size": 0}, "`beam_size` must be a positive integer"),
        ({"beam_size": 2, "num_return_sequences": 3}, "`num_return_sequences` must be at most"),
        ({"method": "greedy", "num_return_sequences": 2}, "`num_return_sequences` must be 1"),
        ({"max_length": 0}, "`max_length` must be a positive integer"),
        ({"start_id": None}, "`start_id` is required"),
        ({"end_id": None}, "`end_id` is required"),
        ({"end_id": 24}, r"`end_id` must be a token id in \[0, 24\)"),
        ({"method": "top_k", "top_k": 0}, "`top_k` must be a positive integer"),
        ({"method": "top_p", "top_p": 0.0}, r"`top_p` must be a float in \(0, 1\]"),
        ({"method": "top_p", "temperature": 0}, "`temperature` must be a positive number"),
        ({"length_penalty": "0.6"}, "`length_penalty` must be a number"),
        ({"seed": -1}, "`seed` must be an int"),
    ],
)
def test_seq2seq_generate_rejects(seq2seq_model, kwargs, match):
    kwargs = {"start_id": START, "end_id": END, **kwargs}
    with pytest.raises(ValueError, match=match):
        seq2seq_model.generate(pad_rows(SOURCES), **kwargs)


def test_encoder_token_ids_must_be_a_batch(seq2seq_model):
    with pytest.raises(ValueError, match="`encoder_token_ids` must be a non-empty int tensor"):
        seq2seq_model.generate(np.array([5, 6, 7]), start_id=START, end_id=END)


def test_max_length_beyond_learned_positions(seq2seq_model):
    with pytest.raises(ValueError, match="`max_length` is too large"):
        seq2seq_model.generate(pad_rows(SOURCES), max_length=65, start_id=START, end_id=END)


def test_lm_beam_search_needs_end_id(lm_model):
    with pytest.raises(ValueError, match="`end_id` is required for beam search"):
        lm_model.generate(pad_rows(SOURCES), method="beam")
