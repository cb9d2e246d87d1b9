"""`TransformerLM.generate` with ragged, right-padded prompts."""

import numpy as np
import pytest
from generation_helpers import (
    END,
    LOGIC_JIT,
    continuation_log_prob,
    pad_rows,
    strip,
    tiny_lm,
    uncached_greedy_lm,
)

pytestmark = pytest.mark.backend_agnostic

# Ragged: the shortest (3 tokens) sets the prefill (2 tokens in one pass), the
# others are fed token by token, their own prompt tokens forced.
PROMPTS = [[5, 6, 7, 8, 9], [9, 10, 3], [4, 12, 13, 14]]
MAX_LENGTH = 14


def test_cached_greedy_equals_uncached_greedy(lm_model):
    ids, scores = lm_model.generate(
        pad_rows(PROMPTS), max_length=MAX_LENGTH, end_id=END, return_scores=True
    )
    stops = set()
    for row, prompt in enumerate(PROMPTS):
        expected = uncached_greedy_lm(lm_model, prompt, MAX_LENGTH, END)
        assert strip(ids[row]) == expected
        continuation = expected[len(prompt) :]
        np.testing.assert_allclose(
            scores[row], continuation_log_prob(lm_model, prompt, continuation), rtol=1e-4
        )
        stops.add(len(expected))
    assert len(stops) >= 2  # rows end at different steps


def test_sliding_window_lm_generates_as_its_full_pass_predicts():
    # The window (3) is shorter than every prompt, so the cache's masks decide what each
    # step sees; a cache that ignored the window would pick other tokens.
    model = tiny_lm(sliding_window=3)
    ids = model.generate(pad_rows(PROMPTS), max_length=MAX_LENGTH, end_id=END)
    for row, prompt in enumerate(PROMPTS):
        assert strip(ids[row]) == uncached_greedy_lm(model, prompt, MAX_LENGTH, END)
    assert model.get_config()["sliding_window"] == 3


def test_beam_search_keeps_the_prompt_and_scores_the_continuation(lm_model):
    ids, scores = lm_model.generate(
        pad_rows(PROMPTS),
        max_length=MAX_LENGTH,
        method="beam",
        beam_size=3,
        num_return_sequences=2,
        end_id=END,
        return_scores=True,
        jit_compile=LOGIC_JIT,
    )
    assert ids.shape[:2] == (len(PROMPTS), 2)
    for row, prompt in enumerate(PROMPTS):
        for rank in range(2):
            tokens = strip(ids[row, rank])
            assert tokens[: len(prompt)] == prompt
            continuation = tokens[len(prompt) :]
            assert continuation[-1] == END or len(tokens) == MAX_LENGTH
            penalty = ((5.0 + len(continuation)) / 6.0) ** 0.6
            expected = continuation_log_prob(lm_model, prompt, continuation) / penalty
            np.testing.assert_allclose(scores[row, rank], expected, rtol=1e-4, atol=1e-4)
        assert scores[row, 0] >= scores[row, 1]


@pytest.mark.parametrize(
    "prompt, match",
    [
        ([[0, 5, 6]], "right-padded"),
        ([[5, 6], [0, 0]], "at least one token"),
    ],
)
def test_prompt_must_be_right_padded_and_non_empty(lm_model, prompt, match):
    with pytest.raises(ValueError, match=match):
        lm_model.generate(np.array(prompt))


def test_max_length_must_exceed_the_prompt(lm_model):
    with pytest.raises(ValueError, match="max_length"):
        lm_model.generate(pad_rows(PROMPTS), max_length=5)
