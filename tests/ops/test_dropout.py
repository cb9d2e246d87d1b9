"""`keras_transformer.ops.dropout` and the `Dropout` layer: rate, scaling, seeds, errors.

The rate must be `p` within 4.5 binomial standard deviations `sqrt(p (1 - p) / n)` (fixed
seeds make each test deterministic), every kept value exactly `x / (1 - p)`. On TensorFlow one
32-bit draw serves two elements, so the two halves of the last axis must be independent too.
"""

import keras
import numpy as np
import pytest

from keras_transformer.layers import Dropout
from keras_transformer.ops.dropout import dropout

pytestmark = pytest.mark.backend_agnostic


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")), np.float64)


@pytest.mark.parametrize("rate", [0.1, 0.2, 0.5])
@pytest.mark.parametrize("shape", [(64, 40, 64), (50, 33, 31)])  # even and odd last axes
def test_drops_at_its_rate_and_scales_the_rest(rate, shape):
    x = keras.random.uniform(shape, 1.0, 2.0, seed=3)
    y = to_numpy(dropout(x, rate, seed=keras.random.SeedGenerator(7)))
    dropped = y == 0
    n = dropped.size
    assert abs(dropped.mean() - rate) <= 4.5 * np.sqrt(rate * (1 - rate) / n)
    kept = ~dropped
    np.testing.assert_allclose(y[kept], to_numpy(x)[kept] / (1 - rate), rtol=1e-6)


def test_halves_of_the_last_axis_are_independent():
    y = to_numpy(dropout(keras.ops.ones((400, 256)), 0.5, seed=keras.random.SeedGenerator(1)))
    dropped = (y == 0).astype(np.float64)
    low, high = dropped[:, :128].ravel(), dropped[:, 128:].ravel()
    correlation = np.corrcoef(low, high)[0, 1]
    assert abs(correlation) < 4.5 / np.sqrt(low.size)


def test_bfloat16_inputs_keep_their_dtype():
    x = keras.ops.ones((8, 16), dtype="bfloat16")
    y = dropout(x, 0.25, seed=keras.random.SeedGenerator(0))
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"
    scaled = float(to_numpy(keras.ops.cast(1 / 0.75, "bfloat16")))
    assert set(np.unique(to_numpy(y))) <= {0.0, scaled}


def test_seed_repeats_and_state_advances():
    x = keras.ops.ones((32, 32))
    first = to_numpy(dropout(x, 0.3, seed=keras.random.SeedGenerator(5)))
    again = to_numpy(dropout(x, 0.3, seed=keras.random.SeedGenerator(5)))
    np.testing.assert_array_equal(first, again)
    generator = keras.random.SeedGenerator(5)
    one, two = (to_numpy(dropout(x, 0.3, seed=generator)) for _ in range(2))
    assert np.any(one != two)


def test_rate_zero_is_identity_and_bad_rates_are_refused():
    x = keras.random.normal((4, 6), seed=0)
    np.testing.assert_array_equal(to_numpy(dropout(x, 0.0)), to_numpy(x))
    for rate in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="`rate` must be in"):
            dropout(x, rate)


def test_layer_trains_with_the_op_and_infers_unchanged():
    layer = Dropout(0.4, seed=2)
    x = keras.ops.ones((64, 64))
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), 1.0)
    y = to_numpy(layer(x, training=True))
    assert abs((y == 0).mean() - 0.4) <= 4.5 * np.sqrt(0.4 * 0.6 / y.size)
    restored = Dropout.from_config(layer.get_config())
    assert restored.get_config() == layer.get_config()
    assert keras.saving.get_registered_name(Dropout) == "keras_transformer>Dropout"


def test_layer_with_noise_shape_shares_its_mask_along_broadcast_axes():
    layer = Dropout(0.5, noise_shape=(8, 1), seed=4)
    y = to_numpy(layer(keras.ops.ones((8, 10)), training=True))
    for row in y:
        assert len(set(row)) == 1
