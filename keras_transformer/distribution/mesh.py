"""`parse_mesh` and `make_distribution`: a `(data, model)` mesh shape → the backend's engine."""

import os
import re

import keras

from keras_transformer.distribution.layout_map import get_layout_map
from keras_transformer.validation import is_int

DATA_AXIS = "batch"  # Keras' name for the batch-sharded axis (`DataParallel`'s default).
MODEL_AXIS = "model"
SIMULATE_HINT = (
    "on a CPU, simulate devices by starting Python with "
    "XLA_FLAGS=--xla_force_host_platform_device_count=8 (JAX)"
)


def parse_mesh(mesh):
    """`"4x2"`, `"8"`, `(4, 2)` or `[8]` → `(data, model)`, e.g. `(4, 2)`.

    A single number is a data-parallel mesh: `"8"` is `(8, 1)`.

    Args:
        mesh: str `"DATAxMODEL"` or `"DATA"`, or a tuple or list of one or two
            positive ints.

    Returns:
        `(data, model)`, a tuple of two positive ints.

    Raises:
        ValueError: naming the value and the expected form.

    Example:

    >>> from keras_transformer.distribution import parse_mesh
    >>> parse_mesh("2x4"), parse_mesh("8"), parse_mesh((4, 2)), parse_mesh([8])
    ((2, 4), (8, 1), (4, 2), (8, 1))
    >>> parse_mesh("4x")
    Traceback (most recent call last):
        ...
    ValueError: `mesh` must be DATAxMODEL (e.g. '4x2': ...) or DATA ... Received: mesh='4x'.
    """
    if isinstance(mesh, str):
        match = re.fullmatch(r"\s*(\d+)\s*(?:[xX×]\s*(\d+)\s*)?", mesh)
        sizes = tuple(int(size) for size in match.groups() if size is not None) if match else ()
    elif isinstance(mesh, (tuple, list)) and all(is_int(size) for size in mesh):
        sizes = tuple(mesh)
    else:
        sizes = ()
    if len(sizes) not in (1, 2) or min(sizes) < 1:
        raise ValueError(
            "`mesh` must be DATAxMODEL (e.g. '4x2': 4 data-parallel replicas of a model split "
            f"over 2 devices) or DATA (e.g. '8'), with positive sizes. Received: mesh={mesh!r}."
        )
    return sizes if len(sizes) == 2 else (sizes[0], 1)


def format_mesh(mesh):
    """`(4, 2)` → `"4x2"`: a mesh shape in the form `parse_mesh` reads.

    [`build`][keras_transformer.models.build] records it in
    `model.build_info["mesh"]`.

    Args:
        mesh: any form [`parse_mesh`][keras_transformer.distribution.parse_mesh]
            accepts.

    Returns:
        str, `"DATAxMODEL"`.

    Raises:
        ValueError: as `parse_mesh`.

    Example:

    >>> from keras_transformer.distribution import format_mesh
    >>> format_mesh((4, 2)), format_mesh("8"), format_mesh(" 2 x 4 ")
    ('4x2', '8x1', '2x4')
    """
    data, model = parse_mesh(mesh)
    return f"{data}x{model}"


def _check_device_count(mesh, devices):
    data, model = mesh
    if data * model != len(devices):
        verb = "is" if len(devices) == 1 else "are"
        raise ValueError(
            f"Mesh {data}x{model} needs {data * model} devices, but {len(devices)} "
            f"{verb} available ({', '.join(str(d) for d in devices[:8])}"
            f"{', ...' if len(devices) > 8 else ''}). Pass a mesh whose sizes multiply to "
            f"{len(devices)}, e.g. {len(devices)}x1; {SIMULATE_HINT}."
        )


def _jax_distribution(mesh, model_config, devices):
    data, model = mesh
    devices = list(keras.distribution.list_devices() if devices is None else devices)
    _check_device_count(mesh, devices)
    if model == 1:
        device_mesh = keras.distribution.DeviceMesh((data,), (DATA_AXIS,), devices)
        return keras.distribution.DataParallel(device_mesh=device_mesh)
    if model_config is None:
        raise ValueError(
            f"A model axis of {model} devices splits the model's weights, so `model_config` "
            "is needed (the model's keyword arguments: hidden_dim, num_heads, "
            "intermediate_dim, ...). Pass it, or a mesh of the form DATAx1."
        )
    device_mesh = keras.distribution.DeviceMesh((data, model), (DATA_AXIS, MODEL_AXIS), devices)
    layout_map = get_layout_map(device_mesh, model_config, model_axis=MODEL_AXIS)
    return keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name=DATA_AXIS)


# TensorFlow's multi-worker strategy must exist before the program runs any op, so
# `join_hosts` makes it first thing and `make_distribution` hands the same one out.
_multi_worker_strategy = None


def join_hosts():
    """Joins a run over several hosts, when the launcher's environment describes one.

    Call it first thing, before any computation:

    - JAX: `keras.distribution.initialize()` when
      `KERAS_DISTRIBUTION_NUM_PROCESSES` is above 1 (with
      `KERAS_DISTRIBUTION_JOB_ADDRESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`;
      see `keras.distribution.initialize`).
    - TensorFlow: a `tf.distribute.MultiWorkerMirroredStrategy` when
      `TF_CONFIG` is set;
      [`make_distribution`][keras_transformer.distribution.make_distribution]
      returns it.

    Returns:
        bool, whether this process joined several hosts.

    Example:

    On one machine (no `TF_CONFIG`, no `KERAS_DISTRIBUTION_NUM_PROCESSES`
    above 1) there is nothing to join:

    >>> from keras_transformer.distribution import join_hosts
    >>> join_hosts()
    False
    """
    global _multi_worker_strategy
    backend = keras.backend.backend()
    if backend == "jax" and int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", "1")) > 1:
        keras.distribution.initialize()
        return True
    if backend == "tensorflow" and "TF_CONFIG" in os.environ:
        if _multi_worker_strategy is None:
            import tensorflow as tf

            _multi_worker_strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return True
    return False


def _tensorflow_strategy(mesh, devices):
    import tensorflow as tf

    data, model = mesh
    if model > 1:
        raise ValueError(
            f"Mesh {data}x{model} splits the model over {model} devices, which only JAX's "
            "`keras.distribution.ModelParallel` does; TensorFlow's `tf.distribute` is "
            f"data-parallel here. Use mesh {data * model}x1, or KERAS_BACKEND=jax."
        )
    if "TF_CONFIG" in os.environ:
        # Several hosts, each replicating the model on its own devices; TF_CONFIG names them.
        join_hosts()
        return _multi_worker_strategy
    if devices is None:
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        devices = [device.name for device in devices]
    _check_device_count(mesh, list(devices))
    return tf.distribute.MirroredStrategy(devices=list(devices))


def make_distribution(mesh, model_config=None, devices=None):
    """Keras' distribution engine for a `(data, model)` mesh over the available devices.

    - JAX: `(data, 1)` → `keras.distribution.DataParallel` (weights
      replicated, batches split); `(data, model)` with `model > 1` →
      `keras.distribution.ModelParallel` with
      [`get_layout_map`][keras_transformer.distribution.get_layout_map] (weights
      split over `model` devices, batches over `data`). Axes are named `"batch"`
      and `"model"`. Make it the global distribution
      (`keras.distribution.set_distribution`) before the model is created:
      variables take their layout when created, and `fit` reads it there.
    - TensorFlow: `(data, 1)` → `tf.distribute.MirroredStrategy` over `data`
      local GPUs (or logical CPUs), or `MultiWorkerMirroredStrategy` when
      `TF_CONFIG` describes several hosts. Create and compile the model under
      its `scope()`.

    [`keras_transformer.models.build(..., mesh=...)`][keras_transformer.models.build] does all of
    this. On several hosts call
    [`join_hosts()`][keras_transformer.distribution.join_hosts] first thing; the
    devices are then those of every host.

    Args:
        mesh: the mesh shape, `"DATAxMODEL"`, `"DATA"` or a tuple (see
            [`parse_mesh`][keras_transformer.distribution.parse_mesh]).
        model_config: dict, the model's keyword arguments, needed when
            `model > 1` (see `get_layout_map`). Defaults to `None`.
        devices: list of devices to use, `data * model` of them. Defaults to
            `None`: every device of the backend (`keras.distribution.list_devices()`
            on JAX; the GPUs, else the logical CPUs, on TensorFlow).

    Returns:
        A `keras.distribution.Distribution` (JAX) or a
        `tf.distribute.Strategy` (TensorFlow).

    Raises:
        ValueError: when the mesh does not match the number of devices, when
            the heads or feed-forward width do not divide over the model axis,
            or when the backend cannot split the model (TensorFlow) or has no
            engine here (PyTorch).

    Example:

    On TensorFlow, one device (here the CPU, named so that the example does
    not depend on the machine) gives a one-replica `MirroredStrategy`; a mesh
    larger than the devices, or one with a model axis, is refused:

    >>> from keras_transformer.distribution import make_distribution
    >>> strategy = make_distribution("1", devices=["/cpu:0"])
    >>> type(strategy).__name__, strategy.num_replicas_in_sync
    ('MirroredStrategy', 1)
    >>> make_distribution("1024")
    Traceback (most recent call last):
        ...
    ValueError: Mesh 1024x1 needs 1024 devices, but ...
    >>> make_distribution("4x2", devices=["/cpu:0"])
    Traceback (most recent call last):
        ...
    ValueError: Mesh 4x2 splits the model over 2 devices, which only JAX's ...

    Model parallelism on JAX, with 8 simulated CPU devices (not run here:
    the devices must be set before JAX starts):

    ```python
    # XLA_FLAGS=--xla_force_host_platform_device_count=8 KERAS_BACKEND=jax
    config = dict(source_vocabulary_size=8000, hidden_dim=64, num_heads=4,
                  intermediate_dim=256)
    distribution = make_distribution("2x4", config)
    keras.distribution.set_distribution(distribution)
    model = keras_transformer.models.Seq2SeqTransformer(**config)
    ```
    """
    mesh = parse_mesh(mesh)
    backend = keras.backend.backend()
    if backend == "jax":
        return _jax_distribution(mesh, model_config, devices)
    if backend == "tensorflow":
        return _tensorflow_strategy(mesh, devices)
    raise ValueError(
        f"No distribution engine for the {backend!r} backend here: use KERAS_BACKEND=jax "
        "(keras.distribution, data and model parallel) or tensorflow (tf.distribute, data "
        "parallel), or leave `mesh` unset."
    )
