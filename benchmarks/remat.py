"""Memory and time that `rematerialize=True` trades on a stack of encoder blocks.

What it measures: one training step (forward with dropout, a scalar loss, gradients with
respect to the input and every weight) of a `keras_transformer.layers.TransformerEncoder` of
``--layers`` blocks (width 256, 4 heads, feed-forward 1,024, dropout 0.1, batch 1 by default),
for each sequence length, in three variants:

* ``plain``: ``rematerialize=False``, every block's activations kept for the backward pass
  (at length n each block keeps, among others, its attention probabilities: batch × heads ×
  n² floats);
* ``rematerialize``: ``rematerialize=True``, each block's call under ``keras.remat``: only the
  blocks' inputs are kept and one block's activations are rebuilt at a time in the backward
  pass;
* ``RematScope``: the plain stack built under ``keras.RematScope(mode="full")``, Keras's own
  switch, reported as a failing row when it fails (it does for dropout: see
  ``docs/keras_features.md``).

Each (variant, length) runs in a fresh interpreter. Columns: the peak resident memory of the
step's first run (compiled beforehand, not run) above the resident memory just before it (the
kernel's peak mark reset through ``/proc/self/clear_refs``, as `benchmarks/attention.py` does),
on JAX also XLA's own account of the compiled step's temporary buffers
(``jax.jit(step).lower(...).compile().memory_analysis().temp_size_in_bytes``, exact and
independent of the allocator), each with its ratio to ``plain``, and milliseconds per step
(median of ``--repeats`` runs after one warm run; ``jax.jit`` on JAX, ``tf.function`` on
TensorFlow). Times on a shared CPU are noisy.

What to expect: TensorFlow's ``tf.recompute_grad`` makes the recomputation depend on the
incoming gradient, so it runs in the backward pass, block by block. ``jax.checkpoint`` only
forbids XLA to merge the recomputation with the forward pass; when to run it is the
scheduler's choice, and XLA's CPU scheduler can run it early, keeping what it was meant to
free: read the XLA column.

Run from the repository root::

    nice -n 10 python benchmarks/remat.py                  # 1,024-4,096 tokens, appends
    KERAS_BACKEND=jax nice -n 10 python benchmarks/remat.py   # the same on JAX, with XLA's account
    python benchmarks/remat.py --lengths 64,128 --output ''   # a quick look
    python benchmarks/remat.py --dry-run                   # prints the plan
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VARIANTS = ("plain", "rematerialize", "RematScope")
HEADER = [
    "length",
    "variant",
    "peak MiB",
    "peak / plain",
    "XLA temp MiB",
    "XLA / plain",
    "ms per step",
    "time / plain",
]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend", default=None, help="Keras backend. Defaults to KERAS_BACKEND, else tensorflow."
    )
    parser.add_argument("--lengths", default="1024,2048,4096")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        parser.error(f"--lengths must be integers separated by commas, got {args.lengths!r}")
    if any(n < 1 for n in args.lengths):
        parser.error(f"--lengths must be positive, got {args.lengths}")
    args.variants = args.variants.split(",")
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    for name in ("layers", "width", "heads", "intermediate", "batch", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be positive")
    return args


def build_stack(variant, args):
    import keras

    from keras_transformer.layers import TransformerEncoder

    def make():
        return TransformerEncoder(
            num_layers=args.layers,
            num_heads=args.heads,
            intermediate_dim=args.intermediate,
            dropout=0.1,
            rematerialize=variant == "rematerialize",
        )

    if variant == "RematScope":
        with keras.RematScope(mode="full"):
            stack = make()
            stack.build((args.batch, None, args.width))
        return stack
    stack = make()
    stack.build((args.batch, None, args.width))
    return stack


def compile_step(stack, x):
    """(run, XLA temp bytes or None): `run()` performs one training step on `x`."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        trainable = [v.value for v in stack.trainable_variables]
        non_trainable = [v.value for v in stack.non_trainable_variables]

        def loss_fn(values, x):
            mapping = list(zip(stack.trainable_variables, values))
            mapping += list(zip(stack.non_trainable_variables, non_trainable))
            # `stack(...)`, not `stateless_call`: a RematScope wraps `__call__`.
            with keras.StatelessScope(state_mapping=mapping):
                return keras.ops.sum(stack(x, training=True))

        compiled = (
            jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1))).lower(trainable, x).compile()
        )
        temp = int(compiled.memory_analysis().temp_size_in_bytes)

        def run():
            jax.block_until_ready(compiled(trainable, x))

        return run, temp
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(stack(x, training=True))
            return tape.gradient(loss, [x] + list(stack.trainable_variables))

        # Traced, not run: the first run is the one whose peak memory is read.
        concrete = step.get_concrete_function(tf.TensorSpec(x.shape, x.dtype))
        return (lambda: [g.numpy() for g in concrete(tf.constant(x))]), None
    raise SystemExit(f"benchmarks/remat.py runs on jax or tensorflow, not {backend}")


def _vm_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def measure(variant, length, args):
    """One (variant, length) in this process: `{"temp", "peak", "ms"}` or `{"error"}`."""
    import numpy as np
    from attention import reset_peak_rss

    x = np.random.default_rng(0).standard_normal((args.batch, length, args.width))
    x = x.astype("float32")
    try:
        stack = build_stack(variant, args)
        run, temp = compile_step(stack, x)
        # The first run's peak: later runs reuse what the allocator kept from it.
        peak = None
        before = _vm_kib("VmRSS")
        if reset_peak_rss() and before is not None:
            run()
            peak = (_vm_kib("VmHWM") - before) * 1024
        else:
            run()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1000)
    except Exception as error:  # a failing variant is a row, not a crash
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
        skip = ("•", "Arguments received", "in user code", "File ", "Exception encountered", "[")
        lines = [line.strip() for line in text.splitlines()]
        # Keras and TensorFlow wrap the cause in context lines: keep the cause.
        causes = [line for line in lines if line and not line.startswith(skip)]
        cause = causes[-1] if causes else type(error).__name__
        return {"error": f"{type(error).__name__}: {cause}"[:200]}
    return {"temp": temp, "peak": peak, "ms": statistics.median(times)}


def measure_in_subprocess(variant, length, argv):
    """`measure` in a fresh interpreter, so that no step's buffers are still held."""
    command = [sys.executable, os.path.abspath(__file__), *argv, "--worker", f"{variant}:{length}"]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"worker exited {done.returncode}: {tail}"[:200]}


def _ratio(value, reference):
    return f"{value / reference:.2f}" if value is not None and reference else "—"


def _mib(value):
    return "—" if value is None else f"{value / 2**20:,.0f}"


def rows_of(results, args):
    rows = []
    for length in args.lengths:
        plain = results.get(("plain", length), {})
        for variant in args.variants:
            r = results[(variant, length)]
            if "error" in r:
                rows.append([f"{length:,}", variant, "fails: " + r["error"]] + ["—"] * 5)
                continue
            rows.append(
                [
                    f"{length:,}",
                    variant,
                    _mib(r["peak"]),
                    _ratio(r["peak"], plain.get("peak")),
                    _mib(r["temp"]),
                    _ratio(r["temp"], plain.get("temp")),
                    f"{r['ms']:,.0f}",
                    _ratio(r["ms"], plain.get("ms")),
                ]
            )
    return rows


def main(argv=None):
    args = parse_args(argv)
    os.environ["KERAS_BACKEND"] = args.backend or os.environ.get("KERAS_BACKEND", "tensorflow")
    plan = [(v, n) for n in args.lengths for v in args.variants]
    if not args.worker:
        print(
            f"{args.layers} encoder blocks, width {args.width}, {args.heads} heads, feed-forward "
            f"{args.intermediate}, batch {args.batch}, {os.environ['KERAS_BACKEND']}: "
            + ", ".join(f"{v}@{n}" for v, n in plan)
        )
    if args.dry_run:
        return None
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    if args.worker:
        variant, length = args.worker.split(":")
        print(json.dumps(measure(variant, int(length), args)))
        return None
    from machine import cpu_description, load_average, versions
    from results import append_section, markdown_table

    load_at_start = load_average()
    worker_argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--dry-run"]
    backend, found = versions()
    results = {}
    for variant, length in plan:
        results[(variant, length)] = measure_in_subprocess(variant, length, worker_argv)
        print(variant, length, results[(variant, length)], flush=True)
    table = markdown_table(HEADER, rows_of(results, args))
    print(table)
    if args.output:
        notes = [
            f"{args.layers} `TransformerEncoder` blocks (width {args.width}, {args.heads} heads, "
            f"feed-forward {args.intermediate}, dropout 0.1), batch {args.batch}, one training "
            "step (forward, sum of the outputs, gradients w.r.t. input and weights).",
            f"Machine: {cpu_description()}; load average {load_at_start} at start, "
            f"{load_average()} at end.",
        ]
        append_section(
            args.output,
            "Rematerialisation of an encoder stack: memory and time against sequence length",
            "benchmarks/remat.py",
            backend,
            found,
            notes,
            table,
        )
        print(f"appended to {args.output}")
    return results


if __name__ == "__main__":
    main()
