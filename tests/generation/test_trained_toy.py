"""Beam search beats greedy search on a model trained where greedy is suboptimal."""

import keras
import numpy as np
import pytest
from generation_helpers import sequence_log_prob, strip

from tests import tiny_models

pytestmark = [pytest.mark.backend_agnostic, pytest.mark.slow]

START, END, A, B, D = 1, 2, 3, 4, 5
C = (6, 7, 8)


def toy_targets(rng, count):
    """60%: A then one of three C's (20% each); 40%: B D. Each then END.

    The likeliest first token (A) leads to the less likely sequences: greedy
    search finds a sequence of probability 0.2, beam search one of 0.4.
    """
    targets = np.empty((count, 3), "int32")
    first_a = rng.random(count) < 0.6
    targets[:, 0] = np.where(first_a, A, B)
    targets[:, 1] = np.where(first_a, rng.choice(C, count), D)
    targets[:, 2] = END
    return targets


def test_beam_search_finds_a_better_sequence_than_greedy():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    model = tiny_models.seq2seq(12, hidden_dim=32, intermediate_dim=64, dropout=0.0)
    count = 64 * 300
    sources = rng.integers(9, 12, (count, 4)).astype("int32")
    targets = toy_targets(rng, count)
    decoder_inputs = np.concatenate([np.full((count, 1), START, "int32"), targets[:, :-1]], 1)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(
        {"encoder_token_ids": sources, "decoder_token_ids": decoder_inputs},
        targets,
        batch_size=64,
        epochs=1,
        verbose=0,
    )

    test_sources = sources[:4]
    greedy = model.generate(test_sources, method="greedy", start_id=START, end_id=END)
    beam = model.generate(test_sources, beam_size=4, start_id=START, end_id=END)
    for row, source in enumerate(test_sources):
        greedy_tokens, beam_tokens = strip(greedy[row]), strip(beam[row])
        assert greedy_tokens[:1] == [A] and greedy_tokens[2:] == [END]
        assert beam_tokens == [B, D, END]
        # Scored by an independent full pass: beam's sequence is clearly more likely
        # (0.4 against 0.2 for a perfectly trained model).
        penalty = ((5.0 + 3) / 6.0) ** 0.6
        greedy_score = sequence_log_prob(model, source, greedy_tokens, START) / penalty
        beam_score = sequence_log_prob(model, source, beam_tokens, START) / penalty
        assert beam_score > greedy_score + 0.05
