"""`simulate_cpu_devices`: one CPU seen as several devices, to try a mesh without accelerators."""

import keras

from keras_transformer.validation import is_int


def simulate_cpu_devices(count):
    """Splits the CPU into `count` devices, when the backend has no accelerator to use.

    - JAX: `jax.config.update("jax_num_cpu_devices", count)`, the equivalent
      of starting Python with
      `XLA_FLAGS=--xla_force_host_platform_device_count=COUNT`. It only
      changes the CPU platform, so on GPUs or TPUs the accelerators stay the
      devices `keras.distribution.list_devices()` returns.
    - TensorFlow without a GPU: `count` logical CPU devices
      (`tf.config.set_logical_device_configuration`). With GPUs: nothing.

    Simulated devices share the CPU's cores: the mesh and its collectives run
    for real, but without any speed-up. Call it before the backend runs any
    operation.

    Args:
        count: int, the number of devices wanted.

    Returns:
        bool, whether the CPU was split (always `True` on JAX).

    Raises:
        RuntimeError: when the backend has already run operations.
        ValueError: for a bad `count`, or on PyTorch.

    Example:

    A run of its own, as it must come first thing (not run here, where the
    backend has started already):

    ```python
    import keras_transformer as kt

    kt.distribution.simulate_cpu_devices(8)  # first thing, before any computation
    model = kt.models.build("translation", preset="tiny", mesh="2x4",
                            source_vocabulary_size=8000)
    ```

    A bad count is refused before anything changes.

    >>> from keras_transformer.distribution import simulate_cpu_devices
    >>> simulate_cpu_devices(0)
    Traceback (most recent call last):
        ...
    ValueError: `count` must be a positive int. Received: count=0.
    """
    if not is_int(count) or count < 1:
        raise ValueError(f"`count` must be a positive int. Received: count={count!r}.")
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        try:
            jax.config.update("jax_num_cpu_devices", count)
        except RuntimeError as error:
            raise RuntimeError(
                "JAX has already started its devices, so they can no longer be simulated. "
                "Call simulate_cpu_devices first thing, or start Python with "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={count}."
            ) from error
        return True
    if backend == "tensorflow":
        import tensorflow as tf

        if tf.config.list_physical_devices("GPU"):
            return False
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * count
            )
        except RuntimeError as error:
            raise RuntimeError(
                "TensorFlow has already started, so its CPU can no longer be split. Call "
                "simulate_cpu_devices first thing, before any TensorFlow operation."
            ) from error
        return True
    raise ValueError(f"No simulated devices on the {backend!r} backend: use JAX or TensorFlow.")
