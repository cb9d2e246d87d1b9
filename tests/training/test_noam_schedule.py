import math

import keras
import numpy as np
import pytest

from keras_transformer.training import NoamSchedule
from tests.harness import check_config_round_trip

pytestmark = pytest.mark.backend_agnostic


def paper_formula(step, model_dim, warmup_steps, scale=1.0):
    return scale * model_dim**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def test_hand_values_for_the_base_model():
    schedule = NoamSchedule(model_dim=512, warmup_steps=4000)
    # iterations 0 is the paper's step 1: 512^-0.5 * 4000^-1.5.
    np.testing.assert_allclose(float(schedule(0)), 1.7469281e-07, rtol=1e-6)
    # iterations 3999 is step 4000, the peak: (512 * 4000)^-0.5.
    np.testing.assert_allclose(float(schedule(3999)), 6.9877124e-04, rtol=1e-6)
    # iterations 15999 is step 16000, decay: 512^-0.5 * 16000^-0.5.
    np.testing.assert_allclose(float(schedule(15999)), 3.4938562e-04, rtol=1e-6)


@pytest.mark.parametrize("iterations", [0, 1, 9, 99, 3998, 3999, 4000, 9999, 99999, 999999])
def test_matches_paper_formula_with_one_based_steps(iterations):
    schedule = NoamSchedule(model_dim=256, warmup_steps=4000, scale=2.0)
    expected = paper_formula(iterations + 1, 256, 4000, scale=2.0)
    np.testing.assert_allclose(float(schedule(iterations)), expected, rtol=1e-6)


def test_peak_is_at_warmup():
    schedule = NoamSchedule(model_dim=64, warmup_steps=100)
    values = np.asarray(schedule(np.arange(1000)))
    assert int(np.argmax(values)) == 99  # step 100
    np.testing.assert_allclose(values[99], (64 * 100) ** -0.5, rtol=1e-6)
    assert np.all(np.diff(values[:100]) > 0)
    assert np.all(np.diff(values[99:]) < 0)


class _ScheduleLayer(keras.layers.Layer):
    def __init__(self, schedule, **kwargs):
        super().__init__(**kwargs)
        self.schedule = schedule

    def call(self, steps):
        return self.schedule(steps)


@pytest.mark.skipif(
    keras.backend.backend() == "torch", reason="torch.compile: experimental in Keras, unused here"
)
def test_traces_under_jit():
    schedule = NoamSchedule(model_dim=128, warmup_steps=50)
    steps = keras.Input(shape=(), dtype="int32")
    model = keras.Model(steps, _ScheduleLayer(schedule)(steps))
    model.compile(jit_compile=True)
    iterations = np.array([0, 10, 49, 50, 500], dtype="int32")
    out = model.predict(iterations, batch_size=5, verbose=0)
    expected = [paper_formula(i + 1, 128, 50) for i in iterations]
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_first_update_uses_step_one_inside_fit():
    # SGD on L = (w - 1)^2 from w = 0: dL/dw = 2(w - 1), so w1 = 2 * lr(step 1) and
    # w2 = w1 + 2 * lr(step 2) * (1 - w1), with lr(step) = 4^-0.5 * step * 10^-1.5.
    schedule = NoamSchedule(model_dim=4, warmup_steps=10)
    model = keras.Sequential(
        [keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")]
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=schedule), loss="mse")
    ones = np.ones((2, 1), dtype="float32")
    model.fit(ones, ones, batch_size=1, epochs=1, shuffle=False, verbose=0)
    lr1 = 0.5 * 1 * 10**-1.5
    lr2 = 0.5 * 2 * 10**-1.5
    w1 = 2 * lr1
    w2 = w1 + 2 * lr2 * (1 - w1)
    assert int(model.optimizer.iterations) == 2
    np.testing.assert_allclose(float(model.get_weights()[0][0, 0]), w2, rtol=1e-5)
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.5 * 3 * 10**-1.5, rtol=1e-6)


def test_config_round_trip():
    check_config_round_trip(NoamSchedule, {"model_dim": 1024, "warmup_steps": 8000, "scale": 2})
    assert NoamSchedule(512).get_config() == {
        "model_dim": 512,
        "warmup_steps": 4000,
        "scale": 1.0,
    }


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"model_dim": 0}, "model_dim"),
        ({"model_dim": 512.0}, "model_dim"),
        ({"model_dim": True}, "model_dim"),
        ({"model_dim": 512, "warmup_steps": 0}, "warmup_steps"),
        ({"model_dim": 512, "warmup_steps": None}, "warmup_steps"),
        ({"model_dim": 512, "scale": 0.0}, "scale"),
        ({"model_dim": 512, "scale": -1}, "scale"),
        ({"model_dim": 512, "scale": math.nan}, "scale"),
    ],
)
def test_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=f"`{argument}` must be a positive"):
        NoamSchedule(**kwargs)
