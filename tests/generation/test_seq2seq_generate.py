"""`Seq2SeqTransformer.generate` against uncached decoding and independent scoring."""

import numpy as np
import pytest
from generation_helpers import (
    END,
    LOGIC_JIT,
    SOURCES,
    START,
    pad_rows,
    sequence_log_prob,
    strip,
    uncached_greedy_seq2seq,
)

pytestmark = pytest.mark.backend_agnostic

MAX_NEW = 12


def greedy(model, sources, **kwargs):
    kwargs = {"max_length": MAX_NEW, "start_id": START, "end_id": END, **kwargs}
    return model.generate(sources, method="greedy", return_scores=True, **kwargs)


def test_cached_greedy_equals_uncached_greedy(seq2seq_model):
    # The cached loop (one compiled program, static cache, padded batch) must pick
    # exactly the tokens of re-running the whole decoder on the growing prefix of
    # each source alone, and report the same log-probabilities.
    ids, scores = greedy(seq2seq_model, pad_rows(SOURCES))
    outputs = []
    for row, source in enumerate(SOURCES):
        expected, log_prob = uncached_greedy_seq2seq(seq2seq_model, source, MAX_NEW)
        assert strip(ids[row]) == expected
        np.testing.assert_allclose(scores[row], log_prob, rtol=1e-4, atol=1e-4)
        outputs.append(expected)
    # Only varied outputs that stop at different steps make this a real check.
    assert len({tuple(o) for o in outputs}) == len(SOURCES)
    assert len({len(o) for o in outputs}) >= 2
    assert min(len(set(o)) for o in outputs) >= 4


def test_end_id_stops_a_row_and_pads_the_rest(seq2seq_model):
    first, _ = greedy(seq2seq_model, pad_rows(SOURCES))
    # Make a token that row 1 first generates at step k > 2 the end token: row 1
    # must stop there, the rest of it must be pad_id, and its prefix must not change.
    row_1 = list(first[1])
    k = next(i for i in range(2, 8) if row_1[i] not in row_1[:i] + [END])
    end_id = int(row_1[k])
    ids, _ = greedy(seq2seq_model, pad_rows(SOURCES), end_id=end_id)
    np.testing.assert_array_equal(ids[1, : k + 1], first[1, : k + 1])
    assert ids.shape[1] > k + 1 and np.all(ids[1, k + 1 :] == seq2seq_model.pad_id)
    for row in (0, 2):
        before = list(first[row]) + [END]
        old_stop = before.index(END)
        if end_id in before[:old_stop]:
            new_stop = before.index(end_id) + 1
            assert np.all(ids[row, new_stop:] == seq2seq_model.pad_id)
        else:
            new_stop = old_stop
        np.testing.assert_array_equal(ids[row, :new_stop], first[row, :new_stop])


def test_greedy_without_xla_matches(seq2seq_model):
    compiled, _ = greedy(seq2seq_model, pad_rows(SOURCES))
    plain, _ = greedy(seq2seq_model, pad_rows(SOURCES), jit_compile=False)
    np.testing.assert_array_equal(plain, compiled)


def test_beam_size_one_is_greedy(seq2seq_model):
    # Without length penalty a single beam is greedy search. (With alpha > 0 it
    # may legitimately continue past greedy's end token to a longer hypothesis
    # with a better normalised score.)
    expected, log_probs = greedy(seq2seq_model, pad_rows(SOURCES), jit_compile=LOGIC_JIT)
    ids, scores = seq2seq_model.generate(
        pad_rows(SOURCES),
        max_length=MAX_NEW,
        beam_size=1,
        length_penalty=0.0,
        start_id=START,
        end_id=END,
        return_scores=True,
        jit_compile=LOGIC_JIT,
    )
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(scores, log_probs, rtol=1e-5, atol=1e-5)


def _beam(model, sources):
    # Default max_length: each source's length + 50, so rows have different limits.
    return model.generate(
        sources, beam_size=4, num_return_sequences=2, start_id=START, end_id=END, return_scores=True
    )


def test_beam_scores_are_length_normalised_log_probs(seq2seq_model):
    ids, scores = _beam(seq2seq_model, pad_rows(SOURCES, width=9))
    assert ids.shape[:2] == (len(SOURCES), 2)
    for row, source in enumerate(SOURCES):
        assert scores[row, 0] >= scores[row, 1]
        assert strip(ids[row, 0]) != strip(ids[row, 1])
        for rank in range(2):
            tokens = strip(ids[row, rank])
            # Finished by the end token, or by the row's own limit (source + 50).
            assert tokens[-1] == END or len(tokens) == len(source) + 50
            assert END not in tokens[:-1]
            penalty = ((5.0 + len(tokens)) / 6.0) ** 0.6
            expected = sequence_log_prob(seq2seq_model, source, tokens) / penalty
            np.testing.assert_allclose(scores[row, rank], expected, rtol=1e-4, atol=1e-4)


def test_padding_in_the_batch_does_not_change_a_row(seq2seq_model):
    # In the batch, sources are padded to 9 (bucket 12) next to longer and shorter
    # rows; alone, each is padded by one token (bucket 8).
    batch_ids, batch_scores = _beam(seq2seq_model, pad_rows(SOURCES, width=9))
    for row, source in enumerate(SOURCES):
        ids, scores = _beam(seq2seq_model, pad_rows([source], width=len(source) + 1))
        for rank in range(2):
            assert strip(ids[0, rank]) == strip(batch_ids[row, rank])
        np.testing.assert_allclose(scores[0], batch_scores[row], rtol=1e-4, atol=1e-4)
