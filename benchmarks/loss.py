"""Label-smoothed cross-entropy: ours against Keras core's, forward and backward.

What it measures: milliseconds per call of the loss value and its gradient with respect to
the logits, compiled (``tf.function`` on TensorFlow, ``jax.jit`` on JAX), for a batch shaped
like one of the translation example's (``--batch`` × ``--length`` tokens over a ``--vocab``
vocabulary, float32 logits, no padding):

* ``ours``: `keras_transformer.training.LabelSmoothedCrossEntropy(0.1)` on sparse labels;
* ``keras_core``: `keras.losses.CategoricalCrossentropy(from_logits=True,
  label_smoothing=0.1)` on one-hot labels made beforehand (the same target distribution,
  so the same value; making the one-hot labels is not timed);
* ``keras_core_sparse``: `keras.losses.SparseCategoricalCrossentropy(from_logits=True)`,
  which has no smoothing: the cost of a plain cross-entropy, for scale.

keras-hub has no token-level label-smoothed loss of its own (its models compile Keras core's
losses), so Keras core stands for both. The contenders take turns call by call in a rotating
order; the figure is the median over the rounds. The values of ``ours`` and ``keras_core``
are checked to agree before timing.

Run from the repository root::

    python benchmarks/loss.py                          # appends to benchmarks/RESULTS.md
    python benchmarks/loss.py --quick --output /tmp/x.md
    KERAS_BACKEND=jax python benchmarks/loss.py
"""

import argparse
import datetime
import os
import shlex
import statistics
import sys
import time

CONTENDERS = ("ours", "keras_core", "keras_core_sparse")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--calls", type=int, default=10, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a small batch, one round")
    parser.add_argument("--backend", choices=["tensorflow", "jax"], default=None)
    parser.add_argument(
        "--output",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md"),
        help="markdown file the table is appended to",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.length, args.vocab, args.calls, args.rounds = 8, 8, 500, 3, 1
    return args


def make_losses():
    import keras

    from keras_transformer.training import LabelSmoothedCrossEntropy

    return {
        "ours": LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=None),
        "keras_core": keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
        "keras_core_sparse": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    }


def value_and_gradient_fn(loss):
    """A compiled `(labels, logits) -> (value, d value / d logits)` for the current backend."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function
        def fn(labels, logits):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                value = loss(labels, logits)
            return value, tape.gradient(value, logits)

        return fn
    if backend == "jax":
        import jax

        return jax.jit(jax.value_and_grad(lambda logits, labels: loss(labels, logits)))
    raise SystemExit(f"benchmarks/loss.py supports TensorFlow and JAX, not {backend}.")


def call(fn, labels, logits):
    import keras

    if keras.backend.backend() == "jax":
        value, grad = fn(logits, labels)
    else:
        value, grad = fn(labels, logits)
    # Reading a number waits for the computation on every backend.
    return float(value), float(keras.ops.convert_to_numpy(grad[0, 0, 0]))


def main(argv=None):
    args = parse_args(argv)
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    import numpy as np

    # The machine and version lines of the training benchmark (this folder is on sys.path).
    from training import cpu_description, load_average, versions

    backend, found = versions()
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((args.batch, args.length, args.vocab)) * 3).astype("float32")
    sparse = rng.integers(1, args.vocab, size=(args.batch, args.length)).astype("int32")
    one_hot = np.eye(args.vocab, dtype="float32")[sparse]
    inputs = {"ours": sparse, "keras_core": one_hot, "keras_core_sparse": sparse}
    fns = {name: value_and_gradient_fn(loss) for name, loss in make_losses().items()}

    values = {name: call(fns[name], inputs[name], logits)[0] for name in CONTENDERS}
    if not np.isclose(values["ours"], values["keras_core"], rtol=1e-4):
        raise SystemExit(f"ours and keras_core disagree: {values}")

    started, load_start = time.perf_counter(), load_average()
    times = {name: [] for name in CONTENDERS}
    for round_index in range(args.rounds):
        order = CONTENDERS[round_index % 3 :] + CONTENDERS[: round_index % 3]
        spent = dict.fromkeys(CONTENDERS, 0.0)
        for _ in range(args.calls):
            for name in order:
                begin = time.perf_counter()
                call(fns[name], inputs[name], logits)
                spent[name] += time.perf_counter() - begin
        for name in CONTENDERS:
            times[name].append(1000 * spent[name] / args.calls)
    elapsed = time.perf_counter() - started

    ms = {name: statistics.median(times[name]) for name in CONTENDERS}
    table = "| contender | ms / call | ours / this (speed) | loss |\n|---|---:|---:|---:|\n"
    for name in CONTENDERS:
        ratio = "—" if name == "ours" else f"{ms[name] / ms['ours']:.2f}"
        table += f"| {name} | {ms[name]:.1f} | {ratio} | {values[name]:.4f} |\n"
    print(table)

    command = "python " + shlex.join(sys.argv)
    if os.environ.get("KERAS_BACKEND"):
        command = f"KERAS_BACKEND={os.environ['KERAS_BACKEND']} {command}"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(args.output, "a") as f:
        f.write(f"\n## Label-smoothed loss, forward and backward, {stamp}\n\n")
        f.write("Appended by `benchmarks/loss.py`; see its docstring for what is measured.\n\n")
        f.write(f"Command: `{command}`\n\n")
        f.write(f"- Backend: {backend}; " + ", ".join(f"{k} {v}" for k, v in found.items()))
        f.write(f"\n- CPU: {cpu_description()}\n")
        f.write(
            f"- Shape: batch {args.batch} × length {args.length} tokens, vocabulary "
            f"{args.vocab}; {args.calls} calls × {args.rounds} rounds (median)\n"
        )
        f.write(
            f"- Wall time: {elapsed:.0f} s; 1-minute load average {load_start:.1f} at the start, "
            f"{load_average():.1f} at the end on {os.cpu_count()} cores\n\n"
        )
        f.write(table)


if __name__ == "__main__":
    main()
