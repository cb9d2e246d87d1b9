"""Beam search on decoders with known distributions, checked against exhaustive search."""

import functools

import keras
import numpy as np
import pytest
from keras import ops
from toy_decoders import (
    END,
    PAD,
    HistoryDecoder,
    exhaustive_best,
    markov_step_fn,
    markov_table,
)

from keras_transformer.generation import beam_search, gnmt_length_penalty, greedy_search

pytestmark = pytest.mark.backend_agnostic

START = 2
# Module constants, so that the compiled runners below are shared between tests.
HISTORY_5 = HistoryDecoder(vocabulary_size=5)
HISTORY_7 = HistoryDecoder(vocabulary_size=7, sharpness=2.0)
HISTORY_9 = HistoryDecoder(vocabulary_size=9)
LIKELY_END = HistoryDecoder(vocabulary_size=6, end_bias=20.0)


def _compile(fn):
    # Eager TensorFlow runs these tiny loops fastest; JAX compiles a loop on every
    # eager call, so compile each configuration once instead.
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    return fn


@functools.cache
def beam_runner(make_step_fn, beam_size, top):
    def run(step_args, cache, sequences, prompt_lengths, limits, alpha):
        return beam_search(
            make_step_fn(step_args),
            cache,
            sequences,
            prompt_lengths,
            limits,
            beam_size=beam_size,
            end_id=END,
            length_penalty=alpha,
            num_return_sequences=top,
        )

    return _compile(run)


@functools.cache
def greedy_runner(make_step_fn):
    def run(step_args, cache, sequences, prompt_lengths, limits):
        return greedy_search(
            make_step_fn(step_args), cache, sequences, prompt_lengths, limits, end_id=END
        )

    return _compile(run)


def _inputs(batch, max_new):
    sequences = np.full((batch, max_new + 1), PAD, "int32")
    sequences[:, 0] = START
    return sequences, np.ones((batch,), "int32"), np.full((batch,), max_new + 1, "int32")


def run_beam(make_step_fn, step_args, batch, max_new, beam_size, alpha, top=1):
    cache = np.zeros((batch * beam_size,), "float32")
    ids, scores, columns = beam_runner(make_step_fn, beam_size, top)(
        step_args, cache, *_inputs(batch, max_new), np.float32(alpha)
    )
    return (
        ops.convert_to_numpy(ids)[:, :, 1:],
        ops.convert_to_numpy(scores),
        int(ops.convert_to_numpy(columns)),
    )


def run_greedy(make_step_fn, step_args, batch, max_new):
    cache = np.zeros((batch,), "float32")
    ids, log_probs, _ = greedy_runner(make_step_fn)(step_args, cache, *_inputs(batch, max_new))
    return ops.convert_to_numpy(ids)[:, 1:], ops.convert_to_numpy(log_probs)


def as_list(row):
    row = list(row)
    return row[: row.index(END) + 1] if END in row else [t for t in row if t != PAD]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_exhaustive_beam_equals_exhaustive_search(alpha):
    # A beam as wide as the number of sequences is exact search: every returned
    # hypothesis, score and rank must match brute-force enumeration. The
    # distribution depends on the whole history through the cache, so a wrong
    # cache reordering, a duplicated first-step expansion or a wrong length
    # convention changes the answer.
    max_new, top = 3, 5
    expected = exhaustive_best(HISTORY_5, START, max_new, alpha, top=top)
    beam_size = 4 * 4 * 4  # > the 40 sequences of up to 3 tokens
    ids, scores, _ = run_beam(HISTORY_5.make_step_fn, None, 2, max_new, beam_size, alpha, top)
    for row in range(2):
        assert [as_list(r) for r in ids[row]] == [seq for _, seq in expected]
        np.testing.assert_allclose(scores[row], [s for s, _ in expected], rtol=1e-4, atol=1e-4)


# A Markov chain over 8 tokens (0 pad, 1 end, 2 start, then a..e).
A, B, C, D, E = 3, 4, 5, 6, 7


def _chain(transitions):
    probs = np.full((8, 8), 1e-12)
    probs[END, END] = 1.0
    for (source, targets), values in transitions.items():
        probs[source, list(targets)] = values
    return markov_table(probs)


def test_greedy_is_suboptimal_and_beam_search_is_not():
    # From the start token: a (0.6) or b (0.4); after a, three near-equal
    # continuations (~0.33 each); after b, c almost surely. Greedy commits to a
    # and scores log(0.6 * 0.34); beam search (2 beams) finds b c, log(0.4).
    table = _chain(
        {
            (START, (A, B)): [0.6, 0.4],
            (A, (C, D, E)): [0.34, 0.33, 0.33],
            (B, (C,)): [1.0],
            (C, (END,)): [1.0],
            (D, (END,)): [1.0],
            (E, (END,)): [1.0],
        }
    )
    greedy, greedy_log_prob = run_greedy(markov_step_fn, table, 1, 5)
    assert as_list(greedy[0]) == [A, C, END]
    np.testing.assert_allclose(greedy_log_prob, np.log([0.6 * 0.34]), rtol=1e-5)

    ids, scores, _ = run_beam(markov_step_fn, table, 1, 5, beam_size=2, alpha=0.6)
    assert as_list(ids[0, 0]) == [B, C, END]
    penalty = float(gnmt_length_penalty(3, 0.6))
    np.testing.assert_allclose(scores[0, 0], np.log(0.4) / penalty, rtol=1e-5)


def test_no_early_stop_while_a_longer_hypothesis_can_still_win():
    # END first (0.7) finishes at once with score log(0.7) = -0.36; the only other
    # path, a b c d END (0.3 * 0.99^4), scores -1.24 / lp(5) = -0.27 with alpha=3.
    # After one step the alive "a" (-1.20) cannot win at its next length's penalty
    # but can at the longest one's, so stopping there would return the short answer.
    table = _chain(
        {
            (START, (END, A)): [0.7, 0.3],
            (A, (B, END)): [0.99, 0.01],
            (B, (C, END)): [0.99, 0.01],
            (C, (D, END)): [0.99, 0.01],
            (D, (END, A)): [0.99, 0.01],
        }
    )
    ids, scores, _ = run_beam(markov_step_fn, table, 1, 5, beam_size=2, alpha=3.0)
    assert as_list(ids[0, 0]) == [A, B, C, D, END]
    expected = np.log(0.3 * 0.99**4) / float(gnmt_length_penalty(5, 3.0))
    np.testing.assert_allclose(scores[0, 0], expected, rtol=1e-4)
    assert expected > np.log(0.7)


def test_early_stop_when_no_alive_beam_can_win():
    # End is by far the likeliest first token: once it is finished, nothing alive
    # can beat it even at the longest length's penalty, so the loop stops after
    # one step instead of running to the limit.
    ids, _, columns = run_beam(LIKELY_END.make_step_fn, None, 1, 30, beam_size=3, alpha=0.6)
    assert as_list(ids[0, 0]) == [END]
    assert columns == 2  # the start token and one generated column


def test_beam_size_one_is_greedy_without_length_penalty():
    greedy, log_probs = run_greedy(HISTORY_7.make_step_fn, None, 3, 8)
    ids, scores, _ = run_beam(HISTORY_7.make_step_fn, None, 3, 8, beam_size=1, alpha=0.0)
    np.testing.assert_array_equal(ids[:, 0], greedy)
    np.testing.assert_allclose(scores[:, 0], log_probs, rtol=1e-5)
    assert len(set(greedy[0])) >= 3  # a varied sequence, not one token repeated


def test_hypotheses_are_distinct_and_sorted():
    ids, scores, _ = run_beam(HISTORY_9.make_step_fn, None, 2, 6, beam_size=4, alpha=0.6, top=4)
    for row in range(2):
        hypotheses = [tuple(as_list(r)) for r in ids[row]]
        assert len(set(hypotheses)) == 4
        assert np.all(np.diff(scores[row]) <= 0)
        assert np.all(np.isfinite(scores[row]))


def test_gnmt_length_penalty():
    np.testing.assert_allclose(
        ops.convert_to_numpy(gnmt_length_penalty(np.array([1, 7, 25]), 0.6)),
        [1.0, 2.0**0.6, 5.0**0.6],
        rtol=1e-6,
    )
    assert float(ops.convert_to_numpy(gnmt_length_penalty(13, 0.0))) == 1.0


@pytest.mark.parametrize("beams", [3, None])
def test_shrinking_batch_changes_no_result(beams):
    # Prompts of different lengths make the inputs finish at different steps, so the
    # batch halves (16, 8, then 4 inputs) while some still run. Every input's
    # hypotheses, scores and the columns reached must equal the full batch's; a
    # per-input `context` (a bias on each input's logits) must follow its input.
    # `beams=None`: greedy search.
    rng = np.random.default_rng(0)
    batch, length, vocabulary = 16, 14, LIKELY_END.vocabulary_size
    copies = beams or 1
    prompt_lengths = rng.integers(1, 10, batch).astype("int32")
    sequences = np.full((batch, length), PAD, "int32")
    for row, prompt_length in enumerate(prompt_lengths):
        sequences[row, :prompt_length] = rng.integers(3, vocabulary, prompt_length)
    sequences[:, 0] = START
    context = rng.normal(size=(batch,)).astype("float32")
    rows_fed = set()

    def step_fn(token_ids, cache, index, context):
        rows_fed.add(token_ids.shape[0])
        logits, cache = LIKELY_END.step_fn(token_ids, cache, index)
        rows_per_input = token_ids.shape[0] // context.shape[0]
        bias = ops.repeat(context, rows_per_input, axis=0)[:, None] * ops.sin(
            ops.arange(vocabulary, dtype="float32")
        )
        return logits + bias, cache

    results = {}
    for shrink in (False, True):
        arguments = (
            step_fn,
            np.zeros((batch * copies,), "float32"),
            sequences,
            prompt_lengths,
            np.full((batch,), length, "int32"),
        )
        options = dict(end_id=END, context=context, shrink_batch=shrink)
        if beams:
            outputs = beam_search(*arguments, beam_size=beams, num_return_sequences=2, **options)
        else:
            outputs = greedy_search(*arguments, **options)
        results[shrink] = [ops.convert_to_numpy(t) for t in outputs]
    # Beam search's first step runs one row per input: its beams are equal then.
    assert rows_fed == {16 * copies, 8 * copies, 4 * copies, 16}
    for full, shrunk in zip(results[False], results[True]):
        np.testing.assert_array_equal(shrunk, full)
    assert len({int(prompt) for prompt in prompt_lengths}) > 4  # inputs finish apart


def test_blockwise_top_k_equals_top_k():
    # Wide rows (beams x vocabulary) take their top-k through block maxima: the same
    # values and indices as `ops.top_k`, ties (rounded values, `-inf` rows) included.
    from keras_transformer.generation.beam import _top_k

    rng = np.random.default_rng(0)
    values = np.round(rng.normal(size=(6, 4 * 3001)), 1).astype("float32")
    values[1] = -np.inf
    values[2, :-5] = -np.inf  # five finite values, at the end of the last (padded) block
    values[3, 7] = np.inf
    expected_values, expected_indices = ops.top_k(values, 8)
    top_values, indices = _top_k(ops.convert_to_tensor(values), 8)
    top_values, indices = ops.convert_to_numpy(top_values), ops.convert_to_numpy(indices)
    np.testing.assert_array_equal(top_values, expected_values)
    np.testing.assert_array_equal(np.take_along_axis(values, indices, axis=1), top_values)
    assert all(len(set(row)) == 8 for row in indices.tolist())
    if keras.backend.backend() != "torch":  # torch orders equal values arbitrarily
        np.testing.assert_array_equal(indices, expected_indices)
