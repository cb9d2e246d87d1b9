import keras
import numpy as np
import pytest

from keras_transformer.layers import PositionEmbedding, SinusoidalPositionEncoding
from tests.harness import run_layer_test

# Backend-agnostic: runs on JAX too (`-m backend_agnostic`).
pytestmark = pytest.mark.backend_agnostic


def paper_table(length, width, start=0):
    pos = np.arange(start, start + length)[:, None].astype("float64")
    i = np.arange(width)[None, :]
    angle = pos / np.power(10000.0, (i - i % 2) / width)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle))


@pytest.mark.parametrize(
    "layer_class, init_kwargs, checks",
    [
        (
            SinusoidalPositionEncoding,
            {"max_wavelength": 10000},
            dict(run_gradients=False, run_training=False),
        ),
        (PositionEmbedding, {"sequence_length": 16}, dict(expected_num_trainable_weights=1)),
    ],
    ids=["sinusoidal", "learned"],
)
def test_layer_contract(layer_class, init_kwargs, checks, rng):
    inputs = rng.standard_normal((2, 9, 12)).astype("float32")
    run_layer_test(layer_class, init_kwargs, inputs, (2, 9, 12), **checks)


def test_sinusoidal_values_and_start_index():
    layer = SinusoidalPositionEncoding()
    x = np.zeros((2, 30, 10), "float32")
    np.testing.assert_allclose(layer(x)[0], paper_table(30, 10), atol=1e-5)
    np.testing.assert_allclose(layer(x, start_index=7)[1], paper_table(30, 10, 7), atol=1e-5)


@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 5e-4), ("mixed_bfloat16", 4e-3)])
def test_sinusoidal_table_is_float32_then_cast(policy, tolerance):
    # keras-hub computes the angles in the compute dtype: max error 0.40 (f16), 1.99 (bf16) here.
    layer = SinusoidalPositionEncoding(dtype=policy)
    table = layer(np.zeros((1, 1024, 64), "float32"))
    assert keras.backend.standardize_dtype(table.dtype) == policy.split("_")[1]
    error = np.abs(np.asarray(keras.ops.cast(table, "float32"))[0] - paper_table(1024, 64))
    assert error.max() <= tolerance


def test_learned_positions_slice_the_table():
    layer = PositionEmbedding(sequence_length=8)
    x = np.zeros((2, 5, 3), "float32")
    out = keras.ops.convert_to_numpy(layer(x, start_index=2))  # PyTorch outputs require grad
    table = keras.ops.convert_to_numpy(layer.position_embeddings)
    np.testing.assert_array_equal(out[1], table[2:7])


def test_learned_input_too_long_is_an_error():
    layer = PositionEmbedding(sequence_length=4)
    with pytest.raises(ValueError, match=r"positions 0..5.*`sequence_length=4`"):
        layer(np.zeros((1, 6, 3), "float32"))
    layer = PositionEmbedding(sequence_length=8)
    layer(np.zeros((1, 2, 3), "float32"))
    with pytest.raises(ValueError, match=r"positions 6..8.*larger `sequence_length`"):
        layer(np.zeros((1, 3, 3), "float32"), start_index=6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="`sequence_length` must be a positive integer"):
        PositionEmbedding(sequence_length=0)
    with pytest.raises(ValueError, match="`max_wavelength` must be greater than 1"):
        SinusoidalPositionEncoding(max_wavelength=0.5)
    with pytest.raises(ValueError, match="`inputs` must have rank 3"):
        SinusoidalPositionEncoding()(np.zeros((2, 3, 4, 5)))
