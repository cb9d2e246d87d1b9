"""Simulated devices for the `multi_device` tests, which run in their own pytest process.

JAX reads `XLA_FLAGS=--xla_force_host_platform_device_count=8` when it starts, so the command
sets it; TensorFlow's CPU is split into two logical devices here, before TensorFlow runs an
op, and only when the run selects `-m multi_device`, so the main suite keeps one CPU device.
"""

import keras
import pytest

TF_DEVICES = 2


def pytest_configure(config):
    if keras.backend.backend() != "tensorflow":
        return
    if (config.getoption("markexpr") or "").strip() != "multi_device":
        return
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * TF_DEVICES
    )


@pytest.fixture(autouse=True)
def _no_leftover_distribution():
    yield
    if keras.backend.backend() == "jax":
        keras.distribution.set_distribution(None)
