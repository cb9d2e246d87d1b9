"""Data-parallel training on 2 logical CPUs with TensorFlow's `MirroredStrategy`.

tests/conftest.py splits the CPU in two before TensorFlow starts.

The batches hold no padding, so each replica averages its loss over as many tokens as the
others and the mean of the replicas' losses is the one-device loss.
"""

import functools

import keras
import numpy as np
import pytest
import translation_case
from translation_case import BATCH, LOSS_TOLERANCE, VOCABULARY, batches

pytestmark = [
    pytest.mark.multi_device,
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.distribute"),
]

build = functools.partial(translation_case.build, num_heads=4)


@pytest.fixture(scope="module", autouse=True)
def two_logical_cpus():
    import tensorflow as tf

    count = len(tf.config.list_logical_devices("CPU"))
    assert count == 2, (
        f"{count} logical CPU(s): tests/conftest.py splits the CPU in two when it is imported "
        "before TensorFlow runs an op"
    )


def train(model):
    inputs, labels = batches()
    history = model.fit(inputs, labels, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    return np.array(history.history["loss"])


def test_mirrored_training_matches_one_device_and_saves(tmp_path):
    import tensorflow as tf

    single = build()
    initial = single.get_weights()
    reference = train(single)

    mirrored = build("2x1")
    strategy = mirrored.distribute_strategy
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == 2
    assert mirrored.build_info["mesh"] == "2x1"
    mirrored.set_weights(initial)
    losses = train(mirrored)
    np.testing.assert_allclose(losses, reference, rtol=LOSS_TOLERANCE)
    # Training moved the weights: the comparison above is not between two untrained models.
    assert not np.allclose(mirrored.get_weights()[0], initial[0])

    inputs = {key: value[:BATCH] for key, value in batches()[0].items()}
    # `predict`, not `predict_on_batch`: under MirroredStrategy Keras 3.15's
    # `predict_on_batch` returns every replica's copy of the batch (32 rows for 16).
    expected = mirrored.predict(inputs, batch_size=BATCH, verbose=0)
    assert expected.shape == (BATCH, 7, VOCABULARY)
    path = str(tmp_path / "mirrored.keras")
    with strategy.scope():
        mirrored.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict_on_batch(inputs), expected, atol=1e-5)
