"""`TransformerLM.generate` sampling, checked token by token against the model's own logits.

`test_sampling.py` pins the top-k / top-p filters on fixed logits and the seq2seq wiring;
here the language model's sampled continuations are re-scored by one full forward pass
(no cache), and every sampled token must lie in the set the method allows at its
position: among the `k` most likely tokens for top-k, in the nucleus (the smallest set of
most likely tokens whose probability reaches `p`) for top-p. Over several seeds the
samples must also use that whole set, not only its most likely token. `end_id=None`
runs every row to `max_length`.
"""

import numpy as np
import pytest
from generation_helpers import LOGIC_JIT, forward, pad_rows, uncached_greedy_lm

pytestmark = pytest.mark.backend_agnostic

PROMPTS = [[5, 6], [9, 10, 3], [4, 12], [7], [11, 13, 14], [8, 3], [15], [6, 6, 6]] * 2
MAX_LENGTH = 12
SEEDS = range(5)


def _sample(lm_model, seed, **kwargs):
    return lm_model.generate(
        pad_rows(PROMPTS), max_length=MAX_LENGTH, seed=seed, jit_compile=LOGIC_JIT, **kwargs
    )


def _sampled_positions(lm_model, ids):
    """`(row, position, log_probs)` of every generated token, from one uncached pass.

    `log_probs` are the float64 log-probabilities of the next token at `position`, with
    the pad token excluded as the decoder excludes it.
    """
    assert ids.shape == (len(PROMPTS), MAX_LENGTH)
    logits = forward(lm_model, ids)
    logits[..., lm_model.pad_id] = -np.inf
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    for row, prompt in enumerate(PROMPTS):
        assert list(ids[row, : len(prompt)]) == prompt
        for position in range(len(prompt), MAX_LENGTH):
            yield row, position, log_probs[row, position - 1]


def test_top_k_of_one_is_greedy(lm_model):
    greedy = _sample(lm_model, seed=None, method="greedy")
    for seed in (3, 4):
        np.testing.assert_array_equal(_sample(lm_model, seed, method="top_k", top_k=1), greedy)


def test_top_k_samples_only_among_the_k_most_likely(lm_model):
    k = 3
    ranks = []
    for seed in SEEDS:
        ids = _sample(lm_model, seed, method="top_k", top_k=k)
        for row, position, log_probs in _sampled_positions(lm_model, ids):
            token = ids[row, position]
            # Rank = how many tokens are strictly more likely (ties share a rank).
            ranks.append(int(np.sum(log_probs > log_probs[token])))
    ranks = np.bincount(ranks, minlength=k)
    assert ranks.sum() == len(SEEDS) * sum(MAX_LENGTH - len(p) for p in PROMPTS)
    assert len(ranks) == k, f"sampled outside the top {k}: ranks {ranks}"
    # Every one of the k is drawn (not greedy, not a smaller set); the most likely most often.
    assert np.all(ranks > 0) and ranks[0] == ranks.max(), ranks


def _nucleus(log_probs, p):
    """The tokens whose more likely tokens sum to less than `p` (ties sorted by id)."""
    order = np.argsort(-log_probs, kind="stable")
    probs = np.exp(log_probs[order])
    before = np.cumsum(probs) - probs
    return order[before < p], before


def test_top_p_samples_only_from_the_nucleus(lm_model):
    p = 0.6
    sizes, in_tail, checked = [], 0, 0
    for seed in SEEDS:
        ids = _sample(lm_model, seed, method="top_p", top_p=p)
        for row, position, log_probs in _sampled_positions(lm_model, ids):
            nucleus, before = _nucleus(log_probs, p)
            if np.min(np.abs(before - p)) < 1e-4:
                continue  # float32 and float64 may disagree at the boundary
            checked += 1
            token = ids[row, position]
            assert token in nucleus, (row, position, token, nucleus, np.exp(log_probs[nucleus]))
            sizes.append(len(nucleus))
            in_tail += len(nucleus) > 1 and token == nucleus[-1]
    assert checked > 0.9 * len(SEEDS) * sum(MAX_LENGTH - len(q) for q in PROMPTS)
    # Non-trivial nuclei occur, and their least likely member is drawn too.
    assert max(sizes) >= 3 and np.mean(np.array(sizes) > 1) > 0.5, np.bincount(sizes)
    assert in_tail > 0


def test_end_id_none_runs_every_row_to_max_length(lm_model):
    prompts = pad_rows(PROMPTS[:4])
    ids = lm_model.generate(prompts, max_length=MAX_LENGTH, jit_compile=LOGIC_JIT)
    assert ids.shape == (4, MAX_LENGTH)
    assert np.all(ids != lm_model.pad_id)
    for row, prompt in enumerate(PROMPTS[:4]):
        assert list(ids[row]) == uncached_greedy_lm(lm_model, prompt, MAX_LENGTH)
    # A token greedy produces early (row 0, second generated token) would have stopped it.
    end = int(ids[0, len(PROMPTS[0]) + 1])
    stopped = lm_model.generate(prompts, max_length=MAX_LENGTH, end_id=end, jit_compile=LOGIC_JIT)
    first_end = list(ids[0]).index(end, len(PROMPTS[0]))
    assert list(stopped[0][: first_end + 1]) == list(ids[0][: first_end + 1])
    assert np.all(stopped[0][first_end + 1 :] == lm_model.pad_id)
    assert first_end + 1 < MAX_LENGTH
