import keras
import numpy as np
import pytest

from keras_transformer.layers import FeedForward
from tests.harness import run_layer_test

# Backend-agnostic: runs on JAX too (`-m backend_agnostic`).
pytestmark = pytest.mark.backend_agnostic


def test_layer_contract(rng):
    run_layer_test(
        FeedForward,
        {"intermediate_dim": 32, "dropout": 0.1},
        rng.standard_normal((2, 5, 12)).astype("float32"),
        (2, 5, 12),
        expected_num_trainable_weights=4,
    )


def test_output_dim_and_values(rng):
    layer = FeedForward(intermediate_dim=6, output_dim=3)
    x = rng.standard_normal((2, 4, 5)).astype("float32")
    out = keras.ops.convert_to_numpy(layer(x))  # not np.asarray: PyTorch outputs require grad
    w1, b1 = (keras.ops.convert_to_numpy(w) for w in layer.intermediate_dense.weights)
    w2, b2 = (keras.ops.convert_to_numpy(w) for w in layer.output_dense.weights)
    np.testing.assert_allclose(out, np.maximum(x @ w1 + b1, 0) @ w2 + b2, rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="`intermediate_dim` must be a positive integer"):
        FeedForward(intermediate_dim=0)
    with pytest.raises(ValueError, match=r"`dropout` must be a float in \[0, 1\)"):
        FeedForward(intermediate_dim=4, dropout=2)
