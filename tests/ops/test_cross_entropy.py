"""`label_smoothed_cross_entropy`: value and hand-written gradient against NumPy."""

import keras
import numpy as np
import pytest

from keras_transformer.ops import label_smoothed_cross_entropy

pytestmark = pytest.mark.backend_agnostic


def numpy_reference(logits, labels, smoothing):
    """Loss and gradient of cross-entropy against (1 - ε) onehot + ε / V, in float64."""
    z = logits.astype(np.float64)
    shifted = z - z.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    target = np.full(z.shape, smoothing / z.shape[-1])
    np.put_along_axis(target, labels[..., None], 1 - smoothing + smoothing / z.shape[-1], -1)
    return -(log_probs * target).sum(-1), np.exp(log_probs) - target


def loss_and_gradient(logits, labels, smoothing, weights, jit=False):
    """The weighted sum of the losses and its gradient, on the active backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def run(z):
            with tf.GradientTape() as tape:
                tape.watch(z)
                losses = label_smoothed_cross_entropy(labels, z, smoothing)
                total = tf.reduce_sum(losses * weights)
            return losses, tape.gradient(total, z)

        if jit:
            run = tf.function(run, jit_compile=True)
        losses, gradient = run(tf.constant(logits))
    elif backend == "jax":
        import jax

        def total(z):
            losses = label_smoothed_cross_entropy(labels, z, smoothing)
            return (losses * weights).sum(), losses

        run = jax.value_and_grad(total, has_aux=True)
        if jit:
            run = jax.jit(run)
        (_, losses), gradient = run(logits)
    else:
        import torch

        z = torch.tensor(logits, requires_grad=True)
        losses = label_smoothed_cross_entropy(torch.tensor(labels), z, smoothing)
        (losses * torch.tensor(weights)).sum().backward()
        gradient = z.grad
    return keras.ops.convert_to_numpy(losses), keras.ops.convert_to_numpy(gradient)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_value_and_gradient_match_numpy(smoothing):
    rng = np.random.default_rng(0)
    logits = (3 * rng.normal(size=(3, 5, 40))).astype("float32")
    labels = rng.integers(0, 40, size=(3, 5)).astype("int32")
    weights = rng.uniform(size=(3, 5)).astype("float32")
    weights[0, 0] = 0.0  # a padded position: no gradient at all
    losses, gradient = loss_and_gradient(logits, labels, smoothing, weights)
    expected_losses, expected_gradient = numpy_reference(logits, labels, smoothing)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        gradient, expected_gradient * weights[..., None], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(gradient[0, 0], 0.0)


def test_compiled_equals_eager():
    if keras.backend.backend() == "torch":
        pytest.skip("no XLA compilation on PyTorch")
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 6, 50)).astype("float32")
    labels = rng.integers(0, 50, size=(2, 6)).astype("int32")
    weights = np.ones((2, 6), "float32")
    eager = loss_and_gradient(logits, labels, 0.1, weights)
    compiled = loss_and_gradient(logits, labels, 0.1, weights, jit=True)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_huge_logits_stay_finite():
    # exp(1e4) overflows float32: the largest logit is subtracted first.
    logits = np.array([[1e4, 0.0, -1e4, 5e3]], "float32")
    labels = np.array([1], "int32")
    losses, gradient = loss_and_gradient(logits, labels, 0.1, np.ones(1, "float32"))
    expected_losses, expected_gradient = numpy_reference(logits, labels, 0.1)
    assert np.all(np.isfinite(losses)) and np.all(np.isfinite(gradient))
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-6)
