"""The `multi_device` tests run on simulated devices, which tests/conftest.py sets up in every
test process: 8 JAX CPU devices (`XLA_FLAGS=--xla_force_host_platform_device_count=8`, read
when JAX starts) and TensorFlow's CPU split into 2 logical devices before TensorFlow runs an op.
"""

import keras
import pytest


@pytest.fixture(autouse=True)
def _no_leftover_distribution():
    yield
    if keras.backend.backend() == "jax":
        keras.distribution.set_distribution(None)
