"""JAX's persistent compilation cache: each program compiled once per machine, not per run.

Under XLA a training or evaluation step compiles once per batch shape, seconds each on a CPU
or a GPU. JAX can write every compiled program to a folder and load it in a later process
that compiles the same program (the same model, shapes, dtypes, JAX version and device),
so the second run of a command starts training at once. The examples' training commands
turn it on by default in `runs/jax_compilation_cache` (`--compilation-cache DIR` moves it,
`--compilation-cache off` turns it off); the GPU benchmark imports
`enable_compilation_cache` from here.

TensorFlow keeps no XLA programs between runs through its public API, and PyTorch's
backend does not compile with XLA: on those backends nothing is cached.
"""

import os

# Relative to the folder the command runs in, as the examples' `runs/...` output folders.
DEFAULT_DIRECTORY = os.path.join("runs", "jax_compilation_cache")


def enable_compilation_cache(directory):
    """Keeps every program JAX compiles from now on in `directory`, for later processes.

    On the JAX backend, sets JAX's public configuration: `jax_compilation_cache_dir`, and
    the thresholds below which JAX would skip a program (one second of compilation, a
    size chosen for the file system) to zero, so that every step is kept, the small
    ones of a quick run on a CPU too. JAX makes the folder when it writes the first
    program. Programs compiled before the call are not written. On TensorFlow and
    PyTorch it does nothing.

    The signature and return value are stable: `benchmarks/gpu.py` calls it too.

    Args:
        directory: str or path-like, the cache folder (relative paths from the current
            folder); `None` turns nothing on.

    Returns:
        The folder as an absolute path, or `None` where nothing was turned on (another
        backend, or `directory` of `None`).

    Example:

    >>> from examples.compilation_cache import enable_compilation_cache
    >>> enable_compilation_cache(None) is None
    True
    >>> # enable_compilation_cache("runs/jax_compilation_cache"): the absolute path on JAX
    """
    import keras

    if directory is None or keras.backend.backend() != "jax":
        return None
    import jax

    directory = os.path.abspath(os.fspath(directory))
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # -1, not 0: 0 lets JAX raise the minimum to suit the file system, skipping small
    # programs.
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return directory
