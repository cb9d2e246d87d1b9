"""Training, generation and saving on 8 simulated JAX devices (`keras.distribution`).

The devices are tests/conftest.py's (8 when JAX runs the tests):

    KERAS_BACKEND=jax python -m pytest -m multi_device

Every mesh starts from the one-device model's weights and sees the same batches without
dropout, so the losses differ only by the order of floating-point sums (all-reduces).
"""

import functools

import keras
import numpy as np
import pytest
import translation_case
from translation_case import BATCH, LOSS_TOLERANCE, STEPS, batches

from keras_transformer.distribution import get_layout_map

pytestmark = [
    pytest.mark.multi_device,
    pytest.mark.skipif(keras.backend.backend() != "jax", reason="keras.distribution on JAX"),
]

# 8 heads and a feed-forward width of 64 split over 8 devices.
build = functools.partial(translation_case.build, num_heads=8)


@pytest.fixture(scope="module", autouse=True)
def eight_devices():
    count = len(keras.distribution.list_devices())
    assert count == 8, (
        f"{count} JAX device(s): start pytest with "
        "XLA_FLAGS=--xla_force_host_platform_device_count=8 (see tests/distribution/conftest.py)"
    )


class BatchLosses(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def train(model):
    inputs, labels = batches()
    record = BatchLosses()
    model.fit(
        inputs, labels, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[record]
    )
    return np.array(record.losses)


@pytest.fixture(scope="module")
def single_device():
    """The reference: no distribution, its initial weights and its losses."""
    keras.distribution.set_distribution(None)
    model = build()
    initial = model.get_weights()
    losses = train(model)
    keras.distribution.set_distribution(None)
    return initial, losses, model.get_weights()


def expected_spec(layout_map, variable):
    layout = layout_map[variable.path]
    return tuple(layout.axes) if layout is not None else (None,) * len(variable.shape)


def spec(variable):
    # JAX drops trailing `None`s from a PartitionSpec; pad it back to the rank.
    axes = tuple(variable.value.sharding.spec)
    return axes + (None,) * (len(variable.shape) - len(axes))


# 8x1 is `DataParallel`, 2x4 `ModelParallel` over both axes; 1x8 (the model axis alone) is
# among the slow tests, and grouped-query attention runs on 1x8 below.
@pytest.mark.parametrize("mesh", ["8x1", "2x4", pytest.param("1x8", marks=pytest.mark.slow)])
def test_training_on_a_mesh_matches_one_device(mesh, single_device):
    initial, reference_losses, reference_weights = single_device
    model = build(mesh)
    model.set_weights(initial)
    losses = train(model)
    assert len(losses) == STEPS
    np.testing.assert_allclose(losses, reference_losses, rtol=LOSS_TOLERANCE)
    for variable, want in zip(model.weights, reference_weights):
        if variable.path.endswith("key/bias"):
            # Softmax ignores a key bias (it adds the same logit to every key), so its
            # gradient is rounding noise, which Adam scales up to full-size steps.
            continue
        np.testing.assert_allclose(variable.numpy(), want, atol=1e-5, err_msg=variable.path)

    # Every weight, and each optimizer slot, lies where the layout map says.
    data, model_size = (int(size) for size in mesh.split("x"))
    if model_size == 1:
        assert isinstance(keras.distribution.distribution(), keras.distribution.DataParallel)
        assert all(spec(v) == (None,) * len(v.shape) for v in model.weights)
        return
    layout_map = get_layout_map(keras.distribution.distribution().device_mesh, model.get_config())
    split = [v for v in model.weights if any(spec(v))]
    assert len(split) >= 19, [v.path for v in split]  # 4 + 4 + 4 attention, 2 + 2 ff ...
    for variable in model.weights:
        assert spec(variable) == expected_spec(layout_map, variable), variable.path
        assert len(variable.value.sharding.device_set) == 8
    slots = {v.path: v for v in model.optimizer.variables}
    query = next(v for v in model.weights if v.path.endswith("self_attention/query/kernel"))
    momentum = next(
        v for p, v in slots.items() if p.endswith("self_attention_query_kernel_momentum")
    )
    assert spec(momentum) == spec(query) == (None, "model", None)


def test_generate_on_a_sharded_model(single_device):
    initial = single_device[0]
    keras.distribution.set_distribution(None)
    plain = build(compile=False)
    plain.set_weights(initial)
    source = batches()[0]["encoder_token_ids"][:2]
    arguments = dict(max_length=6, start_id=1, end_id=2)
    greedy = plain.generate(source, **arguments)
    beam = plain.generate(source, beam_size=2, **arguments)

    sharded = build("2x4", compile=False)
    sharded.set_weights(initial)
    np.testing.assert_array_equal(sharded.generate(source, **arguments), greedy)
    np.testing.assert_array_equal(sharded.generate(source, beam_size=2, **arguments), beam)


def test_saved_on_eight_devices_loads_on_one(single_device, tmp_path):
    sharded = build("2x4")
    sharded.set_weights(single_device[0])
    train(sharded)  # optimizer state and moved weights, both sharded
    inputs = {key: value[:BATCH] for key, value in batches()[0].items()}
    expected = sharded.predict_on_batch(inputs)
    path = str(tmp_path / "sharded.keras")
    sharded.save(path)

    keras.distribution.set_distribution(None)
    loaded = keras.saving.load_model(path)
    for variable in loaded.weights:
        assert len(variable.value.sharding.device_set) == 1, variable.path
    np.testing.assert_allclose(loaded.predict_on_batch(inputs), expected, atol=1e-5)


def test_grouped_query_attention_with_fewer_key_value_heads_than_devices(single_device):
    keras.distribution.set_distribution(None)
    plain = build(compile=False, num_key_value_heads=2)
    inputs = {key: value[:BATCH] for key, value in batches()[0].items()}
    expected = plain.predict_on_batch(inputs)
    sharded = build("1x8", compile=False, num_key_value_heads=2)
    sharded.set_weights(plain.get_weights())
    key = next(v for v in sharded.weights if v.path.endswith("self_attention/key/kernel"))
    assert spec(key) == (None, None, None)  # 2 heads, 8 devices: each keeps both
    np.testing.assert_allclose(sharded.predict_on_batch(inputs), expected, atol=1e-5)


def test_a_mesh_that_does_not_fit_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Mesh 4x4 needs 16 devices, but 8 are available"):
        build("4x4")
    with pytest.raises(
        ValueError, match=r"`num_heads`=4 cannot be split over the 8 devices .*\[1, 2, 4\]"
    ):
        build("1x8", num_heads=4)
