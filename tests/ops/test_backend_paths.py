"""Attention and dropout fast paths of `ops/backend_paths.py` against the plain paths.

Both choices are forced on whichever backend runs, so each pair is compared everywhere, not
only where the backend would pick it. The layer-norm pair is in `test_layer_norm.py`.
"""

import importlib

import keras
import numpy as np
import pytest

from keras_transformer.ops import attention
from keras_transformer.ops import scaled_dot_product_attention as sdpa
from keras_transformer.ops.dropout import dropout

pytestmark = pytest.mark.backend_agnostic

to_numpy = keras.ops.convert_to_numpy


def test_fused_and_explicit_attention_agree(monkeypatch):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(3, 6, 2, 8)).astype("float32") for _ in range(3))
    # Padded keys, and a batch row whose keys are all masked (zeros on both paths).
    mask = np.arange(6)[None, None, None, :] < np.array([6, 3, 0])[:, None, None, None]
    outputs = {}
    for fused in (True, False):
        monkeypatch.setattr(attention, "fused_attention_pays", lambda dtype, fused=fused: fused)
        outputs[fused] = to_numpy(sdpa(q, k, v, mask=mask, is_causal=True))
    np.testing.assert_allclose(outputs[True], outputs[False], rtol=1e-5, atol=1e-6)
    assert not outputs[True][2].any()


@pytest.mark.parametrize("bit_pairs", [True, False])
def test_both_dropout_draws_drop_at_the_rate_and_scale_the_rest(monkeypatch, bit_pairs):
    # `keras_transformer.ops.dropout` is also the function's name, so patch the module.
    module = importlib.import_module("keras_transformer.ops.dropout")
    monkeypatch.setattr(module, "dropout_draws_bit_pairs", lambda: bit_pairs)
    rate, x = 0.2, keras.random.uniform((64, 40, 33), 1.0, 2.0, seed=3)
    y = to_numpy(dropout(x, rate, seed=keras.random.SeedGenerator(7)))
    dropped = y == 0
    assert abs(dropped.mean() - rate) <= 4.5 * np.sqrt(rate * (1 - rate) / dropped.size)
    np.testing.assert_allclose(y[~dropped], to_numpy(x)[~dropped] / (1 - rate), rtol=1e-6)
