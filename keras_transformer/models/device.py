"""The device `build` runs on, and the precision and XLA setting `"auto"` picks for it."""

import dataclasses
import os
import platform

import keras

# CPU flags of native bfloat16 arithmetic (x86: AVX-512 BF16 dot products, AMX tiles).
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """The accelerator (or CPU) that `build` picks precision and XLA for.

    Args:
        platform: `"cpu"`, `"gpu"` or `"tpu"`.
        name: str, a human-readable description of the device.
        compute_capability: `(major, minor)` of an NVIDIA GPU, or `None` when
            not a CUDA GPU or unknown. Defaults to `None`.
        cpu_flags: frozenset of the host CPU's feature flags (from
            `/proc/cpuinfo` on Linux; empty elsewhere). Defaults to empty.

    Example:

    >>> from keras_transformer.models.device import DeviceInfo
    >>> DeviceInfo("cpu", "CPU: Zen 4", cpu_flags=frozenset({"avx512_bf16"})).cpu_has_native_bf16
    True
    >>> DeviceInfo("gpu", "GPU: V100", (7, 0)).compute_capability
    (7, 0)
    """

    platform: str
    name: str
    compute_capability: tuple | None = None
    cpu_flags: frozenset = frozenset()

    @property
    def cpu_has_native_bf16(self):
        return bool(CPU_BF16_FLAGS & self.cpu_flags)


def _parse_capability(value):
    """`"8.0"`, `(8, 0)` or `None` → `(8, 0)` or `None` (ROCm reports `gfx...` names)."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            major, _, minor = value.partition(".")
            return int(major), int(minor or 0)
        major, minor = tuple(value)[:2]
        return int(major), int(minor)
    except (TypeError, ValueError):
        return None


def _cpu_info():
    """`(description, flags)` of the host CPU; flags are empty where `/proc/cpuinfo` is absent."""
    model_name, flags = None, frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model_name is None:
                    model_name = value.strip()
                elif key in ("flags", "Features"):  # the x86 and the ARM spelling
                    flags = frozenset(value.split())
                    break  # every core lists the same flags; x86 names the model first
    except OSError:
        pass  # Not Linux: no flags, hence no claim of native bfloat16.
    name = model_name or platform.processor() or platform.machine() or "unknown"
    return f"CPU: {name} ({os.cpu_count()} cores)", flags


def detect_device():
    """Returns a `DeviceInfo` for the first device of the current Keras backend.

    TensorFlow: `tf.config.list_physical_devices` and, for GPUs,
    `tf.config.experimental.get_device_details`; JAX: `jax.devices()[0]`;
    PyTorch: `torch.cuda`. Anything unrecognised counts as the CPU.

    Returns:
        A `DeviceInfo`.

    Example:

    >>> from keras_transformer.models.device import detect_device
    >>> detect_device().platform in ("cpu", "gpu", "tpu")  # "cpu" without accelerators
    True
    """
    cpu_name, cpu_flags = _cpu_info()
    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform in ("gpu", "tpu"):
                return DeviceInfo(
                    device.platform,
                    f"{device.platform.upper()}: {device.device_kind}",
                    _parse_capability(getattr(device, "compute_capability", None)),
                    cpu_flags,
                )
        elif backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                details = tf.config.experimental.get_device_details(gpus[0])
                return DeviceInfo(
                    "gpu",
                    f"GPU: {details.get('device_name', gpus[0].name)}",
                    _parse_capability(details.get("compute_capability")),
                    cpu_flags,
                )
            if tf.config.list_physical_devices("TPU"):
                return DeviceInfo("tpu", "TPU", None, cpu_flags)
        elif backend == "torch":
            import torch

            if torch.cuda.is_available():
                return DeviceInfo(
                    "gpu",
                    f"GPU: {torch.cuda.get_device_name(0)}",
                    _parse_capability(torch.cuda.get_device_capability(0)),
                    cpu_flags,
                )
    except (RuntimeError, ValueError) as error:
        # A broken driver or runtime: fall back to the CPU rather than fail the build.
        cpu_name = f"{cpu_name}; accelerator detection failed: {error}"
    return DeviceInfo("cpu", cpu_name, None, cpu_flags)


def choose_precision(device):
    """The `"auto"` dtype policy for `device`, and why.

    - GPU of compute capability 8.0 or higher (Ampere on), TPU:
      `"mixed_bfloat16"`: native bfloat16 with float32's range, no loss scaling.
    - Other GPUs (or unknown capability): `"mixed_float16"`, trained with a
      `keras.optimizers.LossScaleOptimizer`.
    - CPU: `"mixed_bfloat16"` if its flags include `avx512_bf16` or
      `amx_bf16` (a training step is faster there in bfloat16, see
      `benchmarks/RESULTS.md`), else `"float32"` (bfloat16 would be emulated,
      and slower).

    Args:
        device: a `DeviceInfo`.

    Returns:
        `(policy_name, reason)`.

    Example:

    >>> from keras_transformer.models.device import DeviceInfo, choose_precision
    >>> choose_precision(DeviceInfo("gpu", "GPU: V100", (7, 0)))
    ('mixed_float16', 'GPU compute capability 7.0 < 8.0 lacks fast bfloat16')
    >>> choose_precision(DeviceInfo("gpu", "GPU: A100", (8, 0)))[0]
    'mixed_bfloat16'
    >>> choose_precision(DeviceInfo("cpu", "CPU", cpu_flags=frozenset({"avx2"})))[0]
    'float32'
    """
    if device.platform == "tpu":
        return "mixed_bfloat16", "TPUs compute natively in bfloat16"
    if device.platform == "gpu":
        capability = device.compute_capability
        if capability is not None and capability >= (8, 0):
            return (
                "mixed_bfloat16",
                f"GPU compute capability {capability[0]}.{capability[1]} >= 8.0",
            )
        if capability is None:
            return "mixed_float16", "GPU of unknown compute capability: float16 runs on all GPUs"
        return (
            "mixed_float16",
            f"GPU compute capability {capability[0]}.{capability[1]} < 8.0 lacks fast bfloat16",
        )
    if device.cpu_has_native_bf16:
        flags = ", ".join(sorted(CPU_BF16_FLAGS & device.cpu_flags))
        return "mixed_bfloat16", f"CPU with native bfloat16 ({flags})"
    return "float32", "CPU without native bfloat16 (avx512_bf16 / amx_bf16)"


def choose_jit_compile(device, backend=None):
    """The `"auto"` `jit_compile` for `device` and a Keras backend, and why.

    - GPU or TPU: `True` (XLA fuses the many small ops of attention and
      normalisation), except on PyTorch, whose `torch.compile` path in Keras
      is still experimental.
    - CPU: `True` on JAX, where `False` would run op by op; `False` on
      TensorFlow (XLA made a training step 5% slower in float32 and 70%
      slower in mixed_bfloat16 on a Zen 4 CPU) and PyTorch.

    Args:
        device: a `DeviceInfo`.
        backend: str, the Keras backend. Defaults to `keras.backend.backend()`.

    Returns:
        `(jit_compile, reason)`.

    Example:

    >>> from keras_transformer.models.device import DeviceInfo, choose_jit_compile
    >>> choose_jit_compile(DeviceInfo("cpu", "CPU"), backend="tensorflow")
    (False, 'TensorFlow on CPU: XLA trains slower than the default runtime')
    >>> choose_jit_compile(DeviceInfo("cpu", "CPU"), backend="jax")[0]
    True
    >>> choose_jit_compile(DeviceInfo("gpu", "GPU: A100", (8, 0)), backend="tensorflow")
    (True, 'XLA on GPU')
    """
    backend = backend or keras.backend.backend()
    if backend == "torch":
        return False, "torch.compile support in Keras is experimental"
    if device.platform in ("gpu", "tpu"):
        return True, f"XLA on {device.platform.upper()}"
    if backend == "jax":
        return True, "JAX on CPU: without jit every op runs eagerly"
    return False, "TensorFlow on CPU: XLA trains slower than the default runtime"
