"""What a benchmark ran on: versions, the CPU, its load, and its measured matmul peak.

Machines differ about 2x from day to day (the same 2-core VM measured 456 and 211 GFLOP/s
float32 on two days), so a fraction of peak means something only against a peak measured
in the same process, which `matmul_peak_gflops` does.
"""

import math
import os
import platform
import time


def versions():
    """`(backend, {package: version})` for the active Keras backend."""
    import keras

    found = {"Python": platform.python_version(), "Keras": keras.__version__}
    backend = keras.backend.backend()
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}.get(backend)
    if module:
        found[{"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}[backend]] = __import__(
            module
        ).__version__
    try:
        import keras_hub

        found["keras-hub"] = keras_hub.__version__
    except ImportError:
        pass
    return backend, found


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return set()


def cpu_description():
    name = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                    break
    except OSError:
        pass
    extras = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in cpu_flags()]
    return f"{name}, {os.cpu_count()} cores" + (f" ({', '.join(extras)})" if extras else "")


def load_average():
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return math.nan


def load_note(load_at_start):
    """The 1-minute load average at a run's start and now, for the run's report."""
    return (
        f"1-minute load average {load_at_start:.1f} at the start, {load_average():.1f} at the "
        f"end on {os.cpu_count()} cores"
    )


def matmul_peak_gflops(dtype="float32", size=2048, seconds=2.0):
    """Dense matmul throughput of this process's backend, GFLOP/s (best of a few runs).

    A `size` x `size` product repeated for about `seconds`; the best of three timed
    batches is the peak, the figure model FLOP utilisation is divided by.
    """
    import keras
    from keras import ops

    a = keras.random.normal((size, size), dtype=dtype, seed=1)
    b = keras.random.normal((size, size), dtype=dtype, seed=2)

    def read(x):  # waits for the product; NumPy has no bfloat16
        return ops.convert_to_numpy(ops.cast(x[:1, :1], "float32"))

    read(ops.matmul(a, b))  # warm-up
    start, reps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 4:
        read(ops.matmul(a, b))
        reps += 1
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            result = ops.matmul(a, b)
        read(result)
        best = max(best, 2 * size**3 * reps / (time.perf_counter() - start) / 1e9)
    return best
