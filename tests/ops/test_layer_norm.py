"""`layer_normalization` and the `LayerNormalization` layer against NumPy and Keras's layer."""

import keras
import numpy as np
import pytest

from keras_transformer.layers import LayerNormalization
from keras_transformer.ops import layer_normalization

pytestmark = pytest.mark.backend_agnostic


def numpy_reference(x, gamma, beta, dy, epsilon):
    """Outputs and the gradients of `sum(outputs * dy)` for x, gamma and beta, in float64."""
    x, gamma, beta, dy = (np.asarray(a, np.float64) for a in (x, gamma, beta, dy))
    mean = x.mean(-1, keepdims=True)
    inverse_std = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + epsilon)
    normalised = (x - mean) * inverse_std
    scaled = dy * gamma
    d_x = inverse_std * (
        scaled
        - scaled.mean(-1, keepdims=True)
        - normalised * (scaled * normalised).mean(-1, keepdims=True)
    )
    axes = tuple(range(x.ndim - 1))
    return normalised * gamma + beta, d_x, (dy * normalised).sum(axes), dy.sum(axes)


def gradients(fn, x, gamma, beta, dy):
    """`fn(x, gamma, beta)` and the gradients of `sum(fn(...) * dy)`, on the active backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.constant(a) for a in (x, gamma, beta)]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            outputs = fn(*tensors)
            total = tf.reduce_sum(tf.cast(outputs, tf.float32) * dy)
        grads = tape.gradient(total, tensors)
    elif backend == "jax":
        import jax

        def total(*args):
            outputs = fn(*args)
            return (outputs.astype("float32") * dy).sum(), outputs

        grads, outputs = jax.grad(total, argnums=(0, 1, 2), has_aux=True)(x, gamma, beta)
    else:
        import torch

        tensors = [torch.tensor(a, requires_grad=True) for a in (x, gamma, beta)]
        outputs = fn(*tensors)
        (outputs.float() * torch.tensor(dy)).sum().backward()
        grads = [t.grad for t in tensors]
    to_numpy = keras.ops.convert_to_numpy
    return to_numpy(outputs), [to_numpy(g) for g in grads]


def test_value_and_gradients_match_numpy():
    rng = np.random.default_rng(0)
    x = (3 + 2 * rng.normal(size=(2, 5, 16))).astype("float32")
    gamma = rng.normal(size=16).astype("float32")
    beta = rng.normal(size=16).astype("float32")
    dy = rng.normal(size=(2, 5, 16)).astype("float32")
    outputs, grads = gradients(
        lambda *args: layer_normalization(*args, epsilon=1e-6), x, gamma, beta, dy
    )
    expected = numpy_reference(x, gamma, beta, dy, 1e-6)
    np.testing.assert_allclose(outputs, expected[0], rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected[1:]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bfloat16_inputs_are_normalised_in_float32_and_returned_in_bfloat16():
    x = keras.ops.cast(keras.random.normal((4, 64), mean=100.0, seed=1), "bfloat16")
    y = layer_normalization(x, keras.ops.ones((64,)), keras.ops.zeros((64,)))
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"
    expected = numpy_reference(
        keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")),
        np.ones(64),
        np.zeros(64),
        np.zeros((4, 64)),
        1e-6,
    )[0]
    # bfloat16 rounding of the result only: statistics of values near 100 in bfloat16 itself
    # would be off by far more.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.cast(y, "float32")), expected, atol=2e-2
    )


@pytest.mark.parametrize("written_out", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_layer_equals_keras_layer_with_the_same_weights(dtype, written_out, monkeypatch):
    # Both gradients, forced on whichever backend runs: the written-out one and Keras's.
    monkeypatch.setattr(
        "keras_transformer.layers.layer_normalization.layer_norm_gradient_written_out",
        lambda: written_out,
    )
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4, 8)).astype("float32")
    ours = LayerNormalization(epsilon=1e-6, dtype=dtype)
    theirs = keras.layers.LayerNormalization(epsilon=1e-6, dtype=dtype)
    ours.build(x.shape)
    theirs.build(x.shape)
    weights = [rng.normal(size=8).astype("float32") for _ in range(2)]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    assert [w.path.split("/")[-1] for w in ours.weights] == ["gamma", "beta"]
    dy = rng.normal(size=x.shape).astype("float32")
    got = gradients(lambda x, g, b: ours(x), x, weights[0], weights[1], dy)
    want = gradients(lambda x, g, b: theirs(x), x, weights[0], weights[1], dy)
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(got[0], want[0], rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(got[1][0], want[1][0], rtol=tolerance, atol=tolerance)


def test_layer_config_round_trips_and_is_registered():
    layer = LayerNormalization(epsilon=1e-5, center=False)
    restored = LayerNormalization.from_config(layer.get_config())
    assert restored.get_config() == layer.get_config()
    assert keras.saving.get_registered_name(LayerNormalization) == (
        "keras_transformer>LayerNormalization"
    )
    # No offset: Keras's own computation, same result as Keras's layer.
    x = keras.random.normal((2, 6), seed=3)
    theirs = keras.layers.LayerNormalization(epsilon=1e-5, center=False)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(x)), keras.ops.convert_to_numpy(theirs(x)), atol=1e-6
    )
