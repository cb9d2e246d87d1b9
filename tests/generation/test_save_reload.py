"""A model reloaded from `.keras` generates exactly what it generated before saving."""

import os

import keras
import numpy as np
import pytest
from generation_helpers import END, LOGIC_JIT, SOURCES, START, pad_rows

pytestmark = pytest.mark.backend_agnostic


def test_seq2seq_generations_survive_save_and_load(seq2seq_model, tmp_path):
    sources = pad_rows(SOURCES)
    kwargs = dict(max_length=10, start_id=START, end_id=END, jit_compile=LOGIC_JIT)
    beam = seq2seq_model.generate(sources, method="beam", beam_size=3, **kwargs)
    greedy = seq2seq_model.generate(sources, method="greedy", **kwargs)
    path = os.path.join(tmp_path, "seq2seq.keras")
    seq2seq_model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(
        loaded.generate(sources, method="beam", beam_size=3, **kwargs), beam
    )
    np.testing.assert_array_equal(loaded.generate(sources, method="greedy", **kwargs), greedy)


def test_lm_generations_survive_save_and_load(lm_model, tmp_path):
    prompt = pad_rows(SOURCES)
    expected = lm_model.generate(prompt, max_length=prompt.shape[1] + 6, jit_compile=LOGIC_JIT)
    path = os.path.join(tmp_path, "lm.keras")
    lm_model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(
        loaded.generate(prompt, max_length=prompt.shape[1] + 6, jit_compile=LOGIC_JIT), expected
    )
