"""EpochSeeds: an epoch's dropout masks depend on the seeds and the epoch, not on the past."""

import keras
import numpy as np
import pytest

from keras_transformer.training import EpochSeeds
from keras_transformer.training.epoch_seeds import epoch_seed

pytestmark = pytest.mark.backend_agnostic


def make_model():
    keras.utils.set_random_seed(7)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


DATA = (
    np.random.default_rng(0).normal(size=(64, 8)).astype("float32"),
    np.random.default_rng(1).normal(size=(64, 1)).astype("float32"),
)


class StateRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.states = []

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            (state,) = [v for v in self.model.variables if v.path.endswith("seed_generator_state")]
            self.states.append(keras.ops.convert_to_numpy(state.value).tolist())


def fit(model, callbacks, epochs, initial_epoch=0):
    model.fit(
        *DATA, batch_size=16, epochs=epochs, initial_epoch=initial_epoch, shuffle=False,
        callbacks=callbacks, verbose=0,
    )  # fmt: skip


def test_each_epoch_starts_its_generators_at_a_fixed_point():
    model = make_model()
    recorder = StateRecorder()
    fit(model, [EpochSeeds(), recorder], epochs=3)
    seed = recorder.states[0][0]
    assert recorder.states == [[epoch_seed(seed, epoch), 0] for epoch in range(3)]
    assert len({state[0] for state in recorder.states}) == 3
    assert epoch_seed(5, 2) == (5 + 2 * 0x9E3779B1) % 2**31


@pytest.mark.skipif(
    keras.backend.backend() == "torch",
    reason="Keras draws unseeded dropout masks from torch's global generator on PyTorch",
)
def test_a_resumed_run_ends_with_the_uninterrupted_weights(tmp_path):
    straight = make_model()
    fit(straight, [EpochSeeds()], epochs=3)

    first = make_model()
    fit(first, [EpochSeeds()], epochs=1)
    first.save_weights(tmp_path / "backup.weights.h5")  # weights and optimizer, as Keras backs up
    resumed = make_model()  # a new process: the generators' counters start again at 0
    resumed.optimizer.build(resumed.trainable_variables)
    resumed.load_weights(tmp_path / "backup.weights.h5")
    fit(resumed, [EpochSeeds()], epochs=3, initial_epoch=1)
    for expected, actual in zip(straight.weights, resumed.weights):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(actual), keras.ops.convert_to_numpy(expected)
        )

    # Without the callback the resumed run draws epoch 0's masks again and ends elsewhere.
    unseeded = make_model()
    unseeded.optimizer.build(unseeded.trainable_variables)
    unseeded.load_weights(tmp_path / "backup.weights.h5")
    fit(unseeded, [], epochs=3, initial_epoch=1)
    differences = [
        np.abs(keras.ops.convert_to_numpy(a) - keras.ops.convert_to_numpy(b)).max()
        for a, b in zip(straight.weights, unseeded.weights)
    ]
    assert max(differences) > 1e-4
