"""Does concatenating the query/key/value kernels on every decoding step cost time?

`MultiHeadAttention` keeps its weights in three `EinsumDense` layers (Keras's shapes,
so weights copy to and from Keras and keras-hub) and multiplies a self-attention input
once by their concatenation, built inside the call. In a compiled decoding loop that
concatenation sits inside the loop body. This measures a loop of `--steps` steps,
each one matrix product of `(rows, width)` by the `(width, 3 * width)` kernel:

* ``per-step``: the kernel concatenated from the three variables inside the body;
* ``once``: one variable holding the concatenated kernel.

Both run under XLA (`jit_compile=True`, as `generate` runs), alternating, on the
backend Keras is set to (TensorFlow by default; JAX too). A ratio near 1 means the
compiler builds the concatenation once (it is loop-invariant).

    python benchmarks/fused_kernel_in_loop.py
    KERAS_BACKEND=jax python benchmarks/fused_kernel_in_loop.py --rows 32
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def loops(width, steps):
    """`{name: fn(x)}`: the two compiled loops over the same three kernels."""
    import keras
    from keras import ops

    heads, head_dim = 8, width // 8
    kernels = [
        keras.Variable(keras.random.normal((width, heads, head_dim), seed=i)) for i in range(3)
    ]
    fused = keras.Variable(
        ops.concatenate([ops.reshape(k, (width, width)) for k in kernels], axis=-1)
    )

    def loop(kernel_of_step):
        def body(i, x):
            projected = ops.matmul(x, kernel_of_step())
            return i + 1, x + projected[:, :width] * 1e-3

        def run(x):
            return ops.fori_loop(0, steps, lambda i, x: body(i, x)[1], x)

        return run

    per_step = loop(
        lambda: ops.concatenate([ops.reshape(k, (width, width)) for k in kernels], axis=-1)
    )
    once = loop(lambda: fused.value)
    return {"per-step": _compiled(per_step), "once": _compiled(once)}


def _compiled(fn):
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    return fn


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=512, help="model width (default 512)")
    parser.add_argument("--rows", type=int, default=128, help="rows per step (default 128)")
    parser.add_argument("--steps", type=int, default=64, help="loop steps (default 64)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    args = parser.parse_args(argv)
    for name in ("width", "rows", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive integer")
    if args.width % 8:
        parser.error("--width must be a multiple of 8 (8 heads)")

    import keras

    x = keras.random.normal((args.rows, args.width), seed=3)
    fns = loops(args.width, args.steps)
    for fn in fns.values():
        keras.ops.convert_to_numpy(fn(x))  # compiles
    times = {name: [] for name in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            keras.ops.convert_to_numpy(fn(x))
            times[name].append((time.perf_counter() - start) / args.steps * 1e3)
    ratios = [a / b for a, b in zip(times["per-step"], times["once"])]
    print(
        f"backend {keras.backend.backend()}, width {args.width}, rows {args.rows}, "
        f"{args.steps} steps, {args.rounds} alternating rounds (median ms per step)"
    )
    for name, values in times.items():
        print(f"  {name:9s} {statistics.median(values):.3f}")
    print(
        f"  per-step / once: {statistics.median(ratios):.3f} "
        f"(rounds {min(ratios):.3f}-{max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
