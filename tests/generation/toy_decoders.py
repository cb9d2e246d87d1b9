"""Step functions with known distributions, to test the search loops without a model.

Each is `step_fn(token_ids (rows, 1), cache, index) -> (logits (rows, V), cache)` as the
loops expect; `log_probs(history)` gives the same distribution in numpy, for exhaustive
search over every sequence.
"""

import itertools

import numpy as np
from keras import ops

PAD, END = 0, 1


class HistoryDecoder:
    """Next-token logits that depend on the whole history, kept in the cache.

    The cache holds a float code of every token fed so far, so a search that
    reorders beams without reordering the cache (or feeds the wrong token)
    gets different distributions and different results. `PAD` is never likely.
    """

    def __init__(self, vocabulary_size=5, sharpness=3.0, end_bias=0.0):
        self.vocabulary_size = vocabulary_size
        self.sharpness = sharpness
        self.end_bias = end_bias

    def _logits(self, code, xp_sin, vocabulary, where):
        logits = self.sharpness * xp_sin(code[:, None] * 0.7311 + vocabulary[None, :] * 1.9173)
        logits = logits + where(vocabulary == END, self.end_bias, 0.0)[None, :]
        return where((vocabulary == PAD)[None, :], -1e9, logits)

    def initial_cache(self, rows):
        return ops.zeros((rows,), "float32")

    def make_step_fn(self, unused_args=None):
        return self.step_fn

    def step_fn(self, token_ids, cache, index):
        code = cache * 1.37 + ops.cast(token_ids[:, 0], "float32") + 0.5
        vocabulary = ops.arange(self.vocabulary_size, dtype="float32")
        logits = self._logits(code, ops.sin, vocabulary, ops.where)
        return logits, code

    def log_probs(self, history):
        """Log-probabilities of the next token after feeding `history` (numpy, float64)."""
        code = np.zeros((1,), "float32")
        for token in history:
            code = (code * np.float32(1.37) + np.float32(token) + np.float32(0.5)).astype("float32")
        vocabulary = np.arange(self.vocabulary_size, dtype="float32")
        logits = self._logits(code, np.sin, vocabulary, np.where)[0].astype("float64")
        return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def exhaustive_best(decoder, start, max_new_tokens, alpha, top=1):
    """Every finished sequence (ended by `END` or by the length limit), best first."""
    tokens = [t for t in range(decoder.vocabulary_size) if t != PAD]
    results = []
    for length in range(1, max_new_tokens + 1):
        for sequence in itertools.product(tokens, repeat=length):
            if END in sequence[:-1]:
                continue
            if length < max_new_tokens and sequence[-1] != END:
                continue
            history, total = [start], 0.0
            for token in sequence:
                total += decoder.log_probs(history)[token]
                history.append(token)
            penalty = ((5.0 + length) / 6.0) ** alpha
            results.append((total / penalty, list(sequence)))
    results.sort(key=lambda r: -r[0])
    return results[:top]


def markov_step_fn(table):
    """First-order chain: the logits of the next token are `table[current token]`."""

    def step_fn(token_ids, cache, index):
        return ops.take(table, token_ids[:, 0], axis=0), cache

    return step_fn


def markov_table(probs):
    """Log-probabilities of a `(V, V)` transition matrix (rows normalised), float32."""
    probs = np.asarray(probs, "float64")
    return np.log(probs / probs.sum(axis=1, keepdims=True)).astype("float32")
