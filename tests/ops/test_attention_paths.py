"""The explicit attention path (TensorFlow's, and any with dropout or scores) equals Keras's op."""

import keras
import numpy as np
import pytest

from keras_transformer.ops import scaled_dot_product_attention

pytestmark = pytest.mark.backend_agnostic


@pytest.mark.parametrize("causal", [False, True])
def test_matches_keras_dot_product_attention(causal):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(3, 7, 2, 8)).astype("float32") for _ in range(3))
    lengths = np.array([7, 5, 3])
    mask = np.arange(7)[None, None, None, :] < lengths[:, None, None, None]  # padded keys
    ours = scaled_dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    # With return_attention_scores the explicit path runs on every backend.
    explicit, _ = scaled_dot_product_attention(
        q, k, v, mask=mask, is_causal=causal, return_attention_scores=True
    )
    reference = keras.ops.dot_product_attention(q, k, v, mask=mask, is_causal=causal)
    for outputs in (ours, explicit):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(outputs),
            keras.ops.convert_to_numpy(reference),
            rtol=1e-5,
            atol=1e-6,
        )
