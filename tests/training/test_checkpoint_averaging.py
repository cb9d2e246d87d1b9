import os

import keras
import numpy as np
import pytest

from keras_transformer.training import CheckpointAveraging, average_checkpoints

pytestmark = pytest.mark.backend_agnostic


def tiny_model(width=4, extra_layer=False):
    """Dense -> BatchNorm -> Dense: Keras stores the BatchNorm first in the file."""
    layers = [keras.layers.Dense(width), keras.layers.BatchNormalization(), keras.layers.Dense(2)]
    if extra_layer:
        layers.append(keras.layers.Dense(2))
    model = keras.Sequential([keras.Input((3,)), *layers])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def dense_stack(depth):
    """`depth` Dense layers, stored as `dense`, `dense_1`, ..., in model order."""
    model = keras.Sequential([keras.Input((3,))] + [keras.layers.Dense(3) for _ in range(depth)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def randomize_optimizer(model, rng):
    """Builds the optimizer and fills its slots, so that saved files carry optimizer state."""
    optimizer = model.optimizer
    if not optimizer.built:
        optimizer.build(model.trainable_variables)
    for variable in optimizer.variables:
        if "float" in str(variable.dtype):
            variable.assign(rng.uniform(0.1, 1.0, variable.shape).astype(variable.dtype))
        else:
            variable.assign(np.full(variable.shape, rng.integers(1, 100), variable.dtype))


def optimizer_state(model):
    return [np.array(v) for v in model.optimizer.variables]


def write_checkpoints(model, directory, rng, suffixes):
    """Saves one checkpoint per suffix into `directory`, each with fresh random weights."""
    directory.mkdir(exist_ok=True)
    paths, snapshots = [], []
    for index, suffix in enumerate(suffixes):
        randomize_optimizer(model, rng)
        weights = [rng.standard_normal(w.shape).astype("float32") for w in model.get_weights()]
        model.set_weights(weights)
        path = str(directory / f"ckpt-{index}{suffix}")
        if suffix == ".keras":
            model.save(path)
        else:
            model.save_weights(path)
        paths.append(path)
        snapshots.append(weights)
    return paths, snapshots


def assert_weights_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def test_average_of_three_checkpoints_is_the_numpy_mean(tmp_path, rng):
    # Eleven layers: the file order must put `dense_10` after `dense_9`.
    model = dense_stack(11)
    paths, snapshots = write_checkpoints(
        model, tmp_path, rng, [".weights.h5", ".keras", ".weights.h5"]
    )
    averaged = average_checkpoints(paths)
    assert len(averaged) == len(model.weights) == 22  # the optimizer is left out
    assert_weights_equal(averaged, [np.mean(ws, axis=0) for ws in zip(*snapshots)])


def test_average_into_model_keeps_optimizer_state(tmp_path, rng):
    paths, snapshots = write_checkpoints(
        tiny_model(), tmp_path, rng, [".weights.h5", ".weights.h5", ".keras"]
    )
    keras.backend.clear_session()
    model = tiny_model()
    randomize_optimizer(model, rng)
    before = optimizer_state(model)
    assert average_checkpoints(paths, model=model) is model
    # Kernels, biases, gamma, beta and the moving statistics, in model order.
    assert len(model.get_weights()) == 8
    assert_weights_equal(model.get_weights(), [np.mean(ws, axis=0) for ws in zip(*snapshots)])
    assert_weights_equal(optimizer_state(model), before)


def test_errors_name_the_problem(tmp_path, rng):
    with pytest.raises(ValueError, match="`paths` is empty"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="single path"):
        average_checkpoints(str(tmp_path / "a.weights.h5"))
    missing = str(tmp_path / "missing.weights.h5")
    with pytest.raises(ValueError, match="not found: .*missing.weights.h5"):
        average_checkpoints([missing])
    with pytest.raises(ValueError, match=r"neither a `\.weights\.h5` file"):
        average_checkpoints([str(tmp_path / "model.npz")])

    narrow, _ = write_checkpoints(tiny_model(width=4), tmp_path / "narrow", rng, [".weights.h5"])
    keras.backend.clear_session()
    wide, _ = write_checkpoints(tiny_model(width=5), tmp_path / "wide", rng, [".weights.h5"])
    with pytest.raises(
        ValueError,
        match=r"Checkpoint 1 .* shape \(5,\) for weight `layers/batch_normalization/vars/0`.*"
        r"checkpoint 0 .* shape \(4,\)",
    ):
        average_checkpoints(narrow + wide)

    other, _ = write_checkpoints(
        tiny_model(extra_layer=True), tmp_path / "other", rng, [".weights.h5"]
    )
    with pytest.raises(ValueError, match="Checkpoint 1 .* not hold the same variables"):
        average_checkpoints(narrow + other)
    with pytest.raises(ValueError, match="`model` must be a `keras.Model`"):
        average_checkpoints(narrow, model="model")


class WeightRecorder(keras.callbacks.Callback):
    def __init__(self, per_batch=False):
        super().__init__()
        self.per_batch = per_batch
        self.weights = []
        self.optimizer_state = None

    def on_train_batch_end(self, batch, logs=None):
        if self.per_batch:
            self.weights.append(self.model.get_weights())

    def on_epoch_end(self, epoch, logs=None):
        if not self.per_batch:
            self.weights.append(self.model.get_weights())
        self.optimizer_state = optimizer_state(self.model)


def fit_data(rng):
    x = rng.standard_normal((12, 3)).astype("float32")
    return x, np.tanh(x[:, :2])


def test_callback_keeps_last_two_epochs_and_ends_on_their_average(tmp_path, rng):
    model = tiny_model()
    directory = tmp_path / "ckpt"
    averaging = CheckpointAveraging(directory, num_checkpoints=2)
    recorder = WeightRecorder()
    model.fit(*fit_data(rng), batch_size=4, epochs=3, verbose=0, callbacks=[averaging, recorder])

    assert sorted(os.listdir(directory)) == ["epoch-00002.weights.h5", "epoch-00003.weights.h5"]
    expected = [np.mean(ws, axis=0) for ws in zip(*recorder.weights[1:])]
    assert_weights_equal(model.get_weights(), expected)
    # The average must differ from the last epoch, or this test proves nothing.
    assert not np.allclose(model.get_weights()[0], recorder.weights[-1][0])
    assert_weights_equal(optimizer_state(model), recorder.optimizer_state)


def test_callback_with_batch_frequency(tmp_path, rng):
    model = tiny_model()
    directory = tmp_path / "ckpt"
    averaging = CheckpointAveraging(str(directory), num_checkpoints=2, save_freq=2)
    recorder = WeightRecorder(per_batch=True)
    # 3 batches per epoch, 2 epochs: saves after batches 2, 4 (across the epoch
    # boundary) and 6; the last two are kept.
    model.fit(*fit_data(rng), batch_size=4, epochs=2, verbose=0, callbacks=[averaging, recorder])

    assert sorted(os.listdir(directory)) == ["step-00000004.weights.h5", "step-00000006.weights.h5"]
    expected = [np.mean(ws, axis=0) for ws in zip(recorder.weights[3], recorder.weights[5])]
    assert_weights_equal(model.get_weights(), expected)


def test_callback_without_checkpoints_leaves_the_model(tmp_path, rng):
    model = tiny_model()
    averaging = CheckpointAveraging(tmp_path, save_freq=100)
    recorder = WeightRecorder()
    model.fit(*fit_data(rng), batch_size=4, epochs=1, verbose=0, callbacks=[averaging, recorder])
    assert os.listdir(tmp_path) == []
    assert_weights_equal(model.get_weights(), recorder.weights[-1])


def test_callback_config():
    averaging = CheckpointAveraging("runs/ckpt", num_checkpoints=20, save_freq=500)
    config = averaging.get_config()
    assert config == {"directory": "runs/ckpt", "num_checkpoints": 20, "save_freq": 500}
    assert CheckpointAveraging(**config).get_config() == config


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"directory": ""}, "directory"),
        ({"directory": None}, "directory"),
        ({"directory": "d", "num_checkpoints": 0}, "num_checkpoints"),
        ({"directory": "d", "num_checkpoints": 2.5}, "num_checkpoints"),
        ({"directory": "d", "save_freq": "batch"}, "save_freq"),
        ({"directory": "d", "save_freq": 0}, "save_freq"),
    ],
)
def test_callback_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=f"`{argument}` must be"):
        CheckpointAveraging(**kwargs)
