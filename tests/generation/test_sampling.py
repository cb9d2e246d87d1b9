"""Top-k and top-p (nucleus) filtering and sampling."""

import numpy as np
import pytest
from generation_helpers import END, LOGIC_JIT, SOURCES, START, log_softmax, pad_rows
from keras import ops

from keras_transformer.generation import top_k_logits, top_p_logits
from keras_transformer.generation.sampling import sample_choice

pytestmark = pytest.mark.backend_agnostic

LOGITS = np.log(np.array([[0.05, 0.4, 0.25, 0.2, 0.1], [0.3, 0.1, 0.1, 0.1, 0.4]], "float32"))


def test_top_k_logits_keeps_the_k_largest():
    kept = np.isfinite(ops.convert_to_numpy(top_k_logits(LOGITS, 2)))
    np.testing.assert_array_equal(kept, [[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]])


def test_top_p_logits_keeps_the_nucleus():
    # Row 0 sorted: 0.4, 0.25, 0.2, ...: p=0.6 needs 0.4 + 0.25; p=0.65 is reached by
    # those two exactly, so a third is not needed; p=0.66 needs the third.
    for p, expected in [(0.3, [0, 1, 0, 0, 0]), (0.6, [0, 1, 1, 0, 0]), (0.66, [0, 1, 1, 1, 0])]:
        kept = np.isfinite(ops.convert_to_numpy(top_p_logits(LOGITS, p)))
        np.testing.assert_array_equal(kept[0], expected)
    kept = np.isfinite(ops.convert_to_numpy(top_p_logits(LOGITS, 1.0)))
    assert kept.all()


@pytest.mark.parametrize("top_k, top_p", [(2, None), (None, 0.6)])
def test_samples_follow_the_filtered_distribution(top_k, top_p):
    rows = 4000
    logits = np.repeat(LOGITS[:1], rows, axis=0)
    drawn = ops.convert_to_numpy(
        sample_choice(logits, np.array([7, 0], "int32"), 3, top_k=top_k, top_p=top_p)
    )
    frequencies = np.bincount(drawn, minlength=5) / rows
    # Both filters keep tokens 1 and 2 (0.4 and 0.25), renormalised.
    np.testing.assert_allclose(frequencies, [0, 0.4 / 0.65, 0.25 / 0.65, 0, 0], atol=0.03)


def test_temperature_flattens_the_distribution():
    rows = 4000
    logits = np.repeat(LOGITS[:1], rows, axis=0)
    drawn = ops.convert_to_numpy(sample_choice(logits, np.array([1, 2], "int32"), 0, 2.0))
    expected = np.exp(log_softmax(LOGITS[0].astype("float64") / 2.0))
    np.testing.assert_allclose(np.bincount(drawn, minlength=5) / rows, expected, atol=0.03)


def _generate(model, **kwargs):
    return model.generate(
        pad_rows(SOURCES),
        max_length=12,
        start_id=START,
        end_id=END,
        jit_compile=LOGIC_JIT,
        **kwargs,
    )


def test_top_k_of_one_is_greedy(seq2seq_model):
    greedy = _generate(seq2seq_model, method="greedy")
    np.testing.assert_array_equal(_generate(seq2seq_model, method="top_k", top_k=1, seed=5), greedy)


def test_top_p_sampling_is_seeded(seq2seq_model):
    def sample(seed, top_p=0.9):
        return _generate(
            seq2seq_model, method="top_p", top_p=top_p, temperature=1.5, seed=seed,
            num_return_sequences=2,
        )  # fmt: skip

    first = sample(seed=11)
    assert first.shape[:2] == (len(SOURCES), 2)
    np.testing.assert_array_equal(sample(seed=11), first)
    assert not np.array_equal(sample(seed=12), first)
    # The two samples of an input are independent draws.
    assert any(not np.array_equal(first[i, 0], first[i, 1]) for i in range(len(SOURCES)))
    # A tiny nucleus holds only the most likely token: greedy, whatever the seed.
    greedy = _generate(seq2seq_model, method="greedy")
    tiny = sample(seed=13, top_p=1e-6)
    np.testing.assert_array_equal(tiny[:, 0, : greedy.shape[1]], greedy)
    np.testing.assert_array_equal(tiny[:, 1, : greedy.shape[1]], greedy)
