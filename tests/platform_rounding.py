"""How the backend and CPU round a 16-bit matrix product: tolerances that hold on any CPU.

A 16-bit product of matrices can sum its terms in float32 and round once, or round partial
sums along the way. JAX and PyTorch on CPU, and TensorFlow on CPUs with AVX-512, round once.
TensorFlow's 16-bit kernels on a CPU with AVX2 only (measured on an AMD EPYC of the Zen 3
generation) do not: there the mean error of a bfloat16 `matmul` of depth 64 is twice that
of one rounding, and of a batched `einsum` six times, float16 included.

The mixed-precision tests bound our layers' error in units of the 16-bit type's roundoff;
they multiply those bounds by `matmul_error_factor`, which is 1 where the platform rounds
once, so that they assert that our code adds nothing beyond what the platform's products do.
"""

import functools

import keras
import numpy as np


def _as_float64(tensor):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")), np.float64)


@functools.cache
def _errors(dtype):
    """Mean errors of `matmul` and batched `einsum` on `dtype` inputs, and of one rounding."""
    rng = np.random.default_rng(0)
    a = keras.ops.cast(rng.normal(size=(8, 16, 64)).astype("float32"), dtype)
    b = keras.ops.cast(rng.normal(size=(8, 64, 16)).astype("float32"), dtype)
    exact = np.matmul(_as_float64(a), _as_float64(b))
    rounded_once = _as_float64(keras.ops.cast(exact.astype("float32"), dtype))
    products = (keras.ops.matmul(a, b), keras.ops.einsum("bij,bjk->bik", a, b))
    return (
        [np.abs(_as_float64(p) - exact).mean() for p in products],
        np.abs(rounded_once - exact).mean(),
    )


def matmul_error_factor(dtype):
    """How many times one rounding's error the platform's 16-bit products make (at least 1).

    Args:
        dtype: `"bfloat16"` or `"float16"`, or a mixed policy's name.

    Returns:
        A float >= 1: the larger of `matmul`'s and `einsum`'s mean error on random
        inputs of depth 64, over the mean error of the exact product rounded once.
    """
    products, once = _errors(dtype.split("_")[-1])
    return max(1.0, max(products) / once)


def sums_in_float32(dtype):
    """Whether the platform's 16-bit `matmul` and `einsum` round once, as a float32 sum would."""
    return matmul_error_factor(dtype) < 1.05
