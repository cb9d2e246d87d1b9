"""`gelu_approximate`: BERT's tanh GELU, serialisable by the blocks that use it."""

import json
import math

import keras
import numpy as np
import pytest

from keras_transformer.layers import FeedForward, TransformerEncoderBlock, gelu_approximate

pytestmark = pytest.mark.backend_agnostic


def test_gelu_approximate_is_the_tanh_formula_not_the_exact_gelu():
    x = np.linspace(-5.0, 5.0, 101).astype("float32")
    expected = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    outputs = keras.ops.convert_to_numpy(gelu_approximate(x))
    np.testing.assert_allclose(outputs, expected, rtol=1e-6, atol=1e-6)
    exact = keras.ops.convert_to_numpy(keras.activations.gelu(x))
    assert np.abs(outputs - exact).max() > 1e-4


def test_registered_under_the_package():
    assert keras.saving.get_registered_name(gelu_approximate) == (
        "keras_transformer>gelu_approximate"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: FeedForward(8, activation=gelu_approximate),
        lambda: TransformerEncoderBlock(2, 8, activation=gelu_approximate),
    ],
    ids=["feed_forward", "encoder_block"],
)
def test_blocks_serialise_and_restore_it(make):
    layer = make()
    config = json.loads(json.dumps(layer.get_config()))
    assert config["activation"]["config"] == "keras_transformer>gelu_approximate"
    restored = type(layer).from_config(config)
    assert restored.activation is gelu_approximate
    revived = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    )
    assert revived.activation is gelu_approximate
