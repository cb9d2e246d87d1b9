"""What runs on which backend: the one place in the package's numerics that asks.

Layers, models and generation call these functions instead of comparing
`keras.backend.backend()` themselves, so every backend- or precision-specific
choice is written down here once, with its reason. Each fast path computes what
the plain path computes; `tests/ops/test_backend_paths.py` checks each pair.
The measurements behind the choices are in `benchmarks/RESULTS.md`.
"""

import keras


def _backend():
    return keras.backend.backend()


def fused_attention_pays(dtype):
    """Whether `keras.ops.dot_product_attention` should run rather than the explicit path.

    TensorFlow has no fused attention kernel: Keras's op runs einsums with extra
    casts there, slower than our explicit einsum-softmax-einsum path. JAX
    (cuDNN / XLA) and PyTorch (SDPA) have real kernels. JAX's fused attention
    asks for float16 x float16 -> float32 dot products, which XLA's CPU backend
    rejects under `jit`, so float16 on a JAX CPU takes the explicit path too.

    Args:
        dtype: the dtype of the queries.

    Returns:
        bool.
    """
    backend = _backend()
    if backend == "tensorflow":
        return False
    if backend != "jax" or keras.backend.standardize_dtype(dtype) != "float16":
        return True
    return not keras.distribution.list_devices()[0].lower().startswith("cpu")


def fused_attention_kernel(dtype, head_dim, flash_attention):
    """The fused kernel that takes padding as lengths and causality as its flag, or `None`.

    JAX's cuDNN attention skips padded and future keys when told their lengths
    and `is_causal` (`keras_transformer.ops.cudnn_attention`), which Keras's
    `dot_product_attention` cannot say: it hands a padding mask over as a bias
    the kernel refuses, and runs XLA's attention instead. The kernel takes
    bfloat16 and float16 heads of at most 128 features, a multiple of 8, on an
    NVIDIA GPU; `flash_attention=True` asks for it whatever the device, as
    Keras's flag does, so that a program can be lowered for CUDA on a CPU
    machine (JAX then raises where the kernel cannot run).

    Args:
        dtype: the dtype of the queries.
        head_dim: int, the size of a query head.
        flash_attention: bool or `None`, the layer's (or Keras's global) flag.

    Returns:
        `"cudnn"` or `None`.
    """
    if _backend() != "jax" or flash_attention is False:
        return None
    if flash_attention:
        return "cudnn"
    takes = keras.backend.standardize_dtype(dtype) in ("bfloat16", "float16")
    takes = takes and head_dim is not None and head_dim % 8 == 0 and head_dim <= 128
    return "cudnn" if takes and keras.distribution.list_devices()[0].startswith("gpu") else None


def dropout_draws_bit_pairs():
    """Whether dropout draws 16 random bits per element (two per 32-bit integer).

    TensorFlow's own dropout draws a uniform number of the input's dtype per
    element, slow in bfloat16 on the CPU; drawing integers and comparing bits is
    faster there. JAX and PyTorch compile `keras.random.dropout` into a fused
    kernel, which is faster than the bit arithmetic.

    Returns:
        bool.
    """
    return _backend() == "tensorflow"


def layer_norm_gradient_written_out():
    """Whether layer normalisation runs with its written-out gradient.

    On TensorFlow's CPU runtime the written-out gradient
    (`keras_transformer.ops.layer_normalization`) reuses the forward pass's
    normalised values and takes about a third less time than the automatic
    one; XLA (JAX) and PyTorch fuse Keras's normalisation and its gradient
    themselves.

    Returns:
        bool.
    """
    return _backend() == "tensorflow"


def stateless_seed_dtype():
    """The dtype of seeds for `keras.random`'s stateless draws in compiled code.

    TensorFlow's stateless ops want int32 seeds under XLA; JAX wants uint32 key
    data.

    Returns:
        str, `"int32"` or `"uint32"`.
    """
    return "int32" if _backend() == "tensorflow" else "uint32"


def compile_function(run, traced, traced_stateless, current_state, jit_compile=True):
    """A generation function compiled the way this backend compiles, as a callable of tensors.

    On TensorFlow, `tf.function` of `traced` (with XLA when `jit_compile`); on
    JAX with `jit_compile`, `jax.jit` of `traced_stateless`, called with the
    model's current variable values so that a jitted function never keeps the
    weights it was traced with; on PyTorch, `run` under `torch.no_grad()`;
    otherwise `run`, eagerly.

    Args:
        run: callable `(*tensors) -> tensors`, the function run eagerly.
        traced: the same function for tracing (it may count its traces).
        traced_stateless: callable `(state, *tensors) -> tensors`, `traced`
            with the variables' values passed in as `state`.
        current_state: callable `() -> state`, the variables' current values.
        jit_compile: bool, whether to compile with XLA (TensorFlow, JAX).

    Returns:
        A callable `(*tensors) -> tensors`.
    """
    backend = _backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(traced, jit_compile=jit_compile, autograph=False, reduce_retracing=False)
    if backend == "jax" and jit_compile:
        import jax

        jitted = jax.jit(traced_stateless)
        return lambda *args: jitted(current_state(), *args)
    if backend == "torch":
        import torch

        def call(*args):
            with torch.no_grad():
                return run(*args)

        return call
    return run
