"""Time and peak memory of one attention layer, forward and backward, against sequence length.

What it measures: for each contender and each sequence length `n` (batch 1, width 256, 4 heads
by default), one self-attention layer's forward pass, a scalar loss (the sum of its outputs) and
the gradients of that loss with respect to the input and every weight:

* ``ours``: `keras_transformer.layers.MultiHeadAttention`, self-attention (one fused Q/K/V
  projection, then `keras_transformer.ops.scaled_dot_product_attention`: on JAX and PyTorch
  `keras.ops.dot_product_attention`, on TensorFlow its own explicit einsum-softmax path);
* ``ours_causal``: the same with ``use_causal_mask=True``;
* ``keras``: `keras.layers.MultiHeadAttention` (Keras core), same width and heads;
* ``keras_causal`` (not run by default): the same with ``use_causal_mask=True``;
* ``naive``: the O(n²) reference, four projections and softmax(QKᵀ/√d)V written out with
  `keras.ops` (the score matrix materialised in float32);
* ``ours_remat``: ``ours`` built under ``keras.RematScope(mode="full")`` (activation
  checkpointing); a failure there is reported as a failing row, not a crash.

Columns: milliseconds per forward+backward (median of ``--repeats`` calls after one warm call;
compiled: ``tf.function`` on TensorFlow, ``jax.jit`` on JAX, eager on PyTorch), and peak memory
above the baseline. Peak memory: each (contender, length) runs in a process of its own (a fork
of a process that has imported the backend but run nothing, or a fresh interpreter with
``--isolation spawn``): it builds the layer, runs it once at length 8 and compiles the step for
length `n`, then resets the kernel's peak-RSS mark (``echo 5 > /proc/self/clear_refs``, which
resets ``VmHWM``; checked against a known allocation, see `peak_rss_works`), runs the step once
and reports ``VmHWM`` minus the RSS just before that run. Where the mark cannot be reset, the
figure is ``ru_maxrss`` minus that RSS, which can only be too low. On JAX the table also gives
XLA's own account of the compiled step's temporary buffers
(``jax.jit(step).lower(...).compile().memory_analysis().temp_size_in_bytes``), which is exact and
independent of the allocator.

Where memory is O(n²): every contender here, on CPU, materialises the score matrix, shape
(batch, heads, n, n), 4 bytes × heads × n² per layer in float32 (at n = 4,096 and 4 heads,
256 MiB), and keeps it (the softmax output) for the backward pass, which builds a gradient of
the same shape. On TensorFlow, `keras.ops.dot_product_attention` is itself an
einsum-softmax-einsum (Keras' TensorFlow backend has no fused kernel and refuses
``flash_attention=True``) and ours takes its own explicit einsum-softmax, so ours and Keras
core take the same O(n²) path as the naive reference on CPU; on JAX's CPU backend the op is
XLA's einsum-softmax too. A fused kernel avoids it: `keras.ops.dot_product_attention` with flash
attention on an NVIDIA GPU (JAX's cuDNN fused attention, ``jax.nn.dot_product_attention
(implementation="cudnn")``; PyTorch's flash kernels) computes the softmax block by block and
keeps only O(n) statistics for the backward pass. The ``path`` column says which one ran (on JAX
it is read from the compiled program: a cuDNN fused-attention custom call or not).
`benchmarks/gpu.py` reuses `measure` for 8k to 32k tokens on an H200.

Run from the repository root (the backend is chosen by ``KERAS_BACKEND`` or ``--backend``)::

    nice -n 10 python benchmarks/attention.py              # full CPU run, appends to RESULTS.md
    python benchmarks/attention.py --quick --output ''     # tiny lengths, ~20 s
    python benchmarks/attention.py --dry-run               # prints the plan, runs nothing
    KERAS_BACKEND=jax python benchmarks/attention.py --lengths 1024,2048 --contenders ours,naive
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONTENDERS = ("ours", "ours_causal", "keras", "keras_causal", "naive", "ours_remat")
DEFAULT_CONTENDERS = ("ours", "ours_causal", "keras", "naive", "ours_remat")
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
QUICK_LENGTHS = (16, 32, 64)
WARM_UP_LENGTH = 8
# The flags that shape a measurement: the keys of the settings `measure` takes, and what a
# `--worker` process is given again.
MEASUREMENT_FLAGS = ("batch", "width", "heads", "dtype", "repeats", "jit")
HEADER = [
    "length",
    "contender",
    "path",
    "ms fwd+bwd",
    "this / ours",
    "peak MiB",
    "scores MiB",
    "peak / scores",
    "XLA temp MiB",
]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lengths", default=None, help="comma-separated sequence lengths")
    parser.add_argument(
        "--contenders",
        default=",".join(DEFAULT_CONTENDERS),
        help=f"comma-separated subset of {','.join(CONTENDERS)}",
    )
    parser.add_argument("--backend", default=None, help="Keras backend (sets KERAS_BACKEND)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--width", type=int, default=256, help="model width")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dtype", default="float32", help="dtype policy of the layers")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls (median)")
    parser.add_argument(
        "--jit", action="store_true", help="XLA on TensorFlow (jit_compile=True); JAX always"
    )
    parser.add_argument("--isolation", choices=("fork", "spawn"), default="fork")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per measurement")
    parser.add_argument("--quick", action="store_true", help=f"lengths {QUICK_LENGTHS}")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "RESULTS.md"),
        help="Markdown file to append the results to ('' to skip)",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.lengths:
        try:
            args.lengths = [int(n) for n in args.lengths.split(",") if n.strip()]
        except ValueError:
            parser.error(f"--lengths must be comma-separated integers; got {args.lengths!r}")
    else:
        args.lengths = list(QUICK_LENGTHS if args.quick else LENGTHS)
    if not args.lengths or min(args.lengths) < 1:
        parser.error("--lengths must be positive integers")
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = sorted(set(args.contenders) - set(CONTENDERS))
    if unknown or not args.contenders:
        parser.error(f"--contenders: unknown {unknown}; choose from {','.join(CONTENDERS)}")
    for name in ("batch", "width", "heads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.width % args.heads:
        parser.error(f"--width ({args.width}) must be a multiple of --heads ({args.heads})")
    if args.repeats is None:
        args.repeats = 3
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    return args


def settings_of(args):
    """The shape of the measurement, as `measure` takes it."""
    return {name: getattr(args, name) for name in MEASUREMENT_FLAGS}


def worker_flags(settings):
    """The flags that give a `--worker` process `settings` (from `settings_of`) again."""
    flags = []
    for name, value in settings.items():
        if isinstance(value, bool):  # a switch: `--jit` or nothing
            flags += [f"--{name}"] if value else []
        else:
            flags += [f"--{name}", str(value)]
    return flags


def score_matrix_bytes(batch, heads, length, itemsize=4):
    """Bytes of one (batch, heads, n, n) score matrix: the O(n²) term of attention."""
    return batch * heads * length * length * itemsize


# ---------------------------------------------------------------------------------------------
# The contenders.


def naive_attention_class():
    import keras
    from keras import ops

    class NaiveAttention(keras.layers.Layer):
        """softmax(QKᵀ/√d)V with four projections, every step spelled out (the O(n²) reference)."""

        def __init__(self, num_heads, **kwargs):
            super().__init__(**kwargs)
            self.num_heads = num_heads

        def build(self, input_shape):
            width = input_shape[-1]
            head = width // self.num_heads
            self.kernels = [
                self.add_weight(name=name, shape=shape, initializer="glorot_uniform")
                for name, shape in (
                    ("query", (width, self.num_heads, head)),
                    ("key", (width, self.num_heads, head)),
                    ("value", (width, self.num_heads, head)),
                    ("output", (self.num_heads, head, width)),
                )
            ]

        def call(self, x):
            query, key, value, output = self.kernels
            q = ops.einsum("btd,dnh->btnh", x, query)
            k = ops.einsum("bsd,dnh->bsnh", x, key)
            v = ops.einsum("bsd,dnh->bsnh", x, value)
            logits = ops.einsum("btnh,bsnh->bnts", q, k)
            logits = ops.cast(logits, "float32") / math.sqrt(q.shape[-1])
            probs = ops.cast(ops.softmax(logits, axis=-1), v.dtype)
            y = ops.einsum("bnts,bsnh->btnh", probs, v)
            return ops.einsum("btnh,nhd->btd", y, output)

    return NaiveAttention


def build_contender(name, settings):
    """`(layer, call)`: the built layer and `call(x)`, its self-attention call."""
    import keras

    import keras_transformer as kt

    heads, width, dtype = settings["heads"], settings["width"], settings["dtype"]
    if name in ("ours", "ours_causal"):
        layer = kt.layers.MultiHeadAttention(heads, dtype=dtype, name=name)
    elif name == "ours_remat":
        with keras.RematScope(mode="full"):
            layer = kt.layers.MultiHeadAttention(heads, dtype=dtype, name=name)
    elif name in ("keras", "keras_causal"):
        layer = keras.layers.MultiHeadAttention(
            heads, key_dim=width // heads, dtype=dtype, name=name
        )
    elif name == "naive":
        layer = naive_attention_class()(heads, dtype=dtype, name=name)
    else:
        raise ValueError(f"Unknown contender {name!r}; choose from {CONTENDERS}.")
    causal = name.endswith("_causal")
    if name == "naive":

        def call(x):
            return layer(x)
    else:

        def call(x):
            return layer(x, x, use_causal_mask=causal) if causal else layer(x, x)

    return layer, call


# ---------------------------------------------------------------------------------------------
# Forward + backward, compiled the backend's way.


class Step:
    """Forward + backward of `call` on one backend: `compile(shape)`, then `run(x)`.

    `compile` traces (TensorFlow) or compiles (JAX) the step for one input shape and returns what
    the backend reports about it: on JAX the compiled program's temporary bytes and whether it
    holds a cuDNN fused-attention call. `run` computes the loss and every gradient and waits for
    them.
    """

    def __init__(self, layer, call, settings):
        import keras

        self.backend = keras.backend.backend()
        self.layer, self.call, self.settings = layer, call, settings
        self.compiled = {}

    def inputs(self, length, seed=0):
        import keras

        shape = (self.settings["batch"], length, self.settings["width"])
        x = keras.random.normal(shape, seed=seed)
        return keras.ops.cast(x, self.layer.compute_dtype)

    def compile(self, length):
        x = self.inputs(length)
        if self.backend == "tensorflow":
            return self._compile_tensorflow(x)
        if self.backend == "jax":
            return self._compile_jax(x)
        return {}

    def run(self, x):
        key = tuple(x.shape)
        if self.backend == "torch":
            return self._run_torch(x)
        if key not in self.compiled:
            self.compile(x.shape[1])
        outputs = self.compiled[key](x)
        if self.backend == "jax":
            import jax

            jax.block_until_ready(outputs)
        return outputs

    def _compile_tensorflow(self, x):
        import tensorflow as tf

        variables = self.layer.trainable_variables

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(tf.cast(self.call(x), "float32"))
            return loss, tape.gradient(loss, [x] + list(variables))

        function = tf.function(step, jit_compile=bool(self.settings.get("jit")))
        concrete = function.get_concrete_function(tf.TensorSpec(x.shape, x.dtype))
        self.compiled[tuple(x.shape)] = concrete
        return {"path": "einsum-softmax (TF)"}

    def _compile_jax(self, x):
        import jax
        import keras

        layer, call = self.layer, self.call
        trainable = [v.value for v in layer.trainable_variables]

        def loss_fn(values, x):
            # `layer(...)` rather than `stateless_call`, so that a RematScope's
            # wrapping of `__call__` is what runs.
            with keras.StatelessScope(state_mapping=list(zip(layer.trainable_variables, values))):
                return keras.ops.sum(keras.ops.cast(call(x), "float32"))

        grad = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1)))
        compiled = grad.lower(trainable, x).compile()
        self.compiled[tuple(x.shape)] = lambda x: compiled(trainable, x)
        info = {}
        try:
            analysis = compiled.memory_analysis()
            info["xla_temp_bytes"] = int(analysis.temp_size_in_bytes)
        except Exception:  # some runtimes have no memory analysis
            pass
        text = compiled.as_text() or ""
        fused = "cudnn$fmha" in text or "__cudnn$fmha" in text or "flash" in text.lower()
        info["path"] = "cuDNN fused" if fused else "einsum-softmax (XLA)"
        return info

    def _run_torch(self, x):
        import torch

        x = x.detach().requires_grad_(True)
        loss = torch.sum(self.call(x).float())
        params = [v.value for v in self.layer.trainable_variables]
        return loss, torch.autograd.grad(loss, [x] + params)


# ---------------------------------------------------------------------------------------------
# Peak resident memory.


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def reset_peak_rss():
    """Resets this process's peak-RSS mark (VmHWM) to its current RSS; False if it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_works():
    """Whether a reset peak mark then sees a 64 MiB allocation (within 8 MiB)."""
    if not reset_peak_rss():
        return False
    try:
        before = _status_kib("VmRSS")
        block = bytearray(64 << 20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page
        grown = (_status_kib("VmHWM") - before) / 1024
        del block
    except OSError:
        return False
    return abs(grown - 64) < 8


class PeakMemory:
    """Peak RSS above the RSS at `start()`, in MiB."""

    def start(self):
        import resource

        self.exact = reset_peak_rss()
        self.rss = _status_kib("VmRSS")
        self.maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def peak_mib(self):
        import resource

        if self.exact:
            return (_status_kib("VmHWM") - self.rss) / 1024
        return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self.rss) / 1024


# ---------------------------------------------------------------------------------------------
# One measurement.


def measure(contender, length, settings, rss=True, run_limit_bytes=None):
    """Time and memory of one (contender, length); a dict, with `error` if it failed.

    Keys: `ms` (median forward+backward), `peak_mib` (with `rss`: peak RSS above the RSS before
    the measured call), `xla_temp_mib` (JAX), `path` (which attention ran), `error`. A step
    whose XLA temporaries exceed `run_limit_bytes` is compiled but not run (no `ms`).
    """
    import keras

    keras.utils.set_random_seed(0)
    result = {"contender": contender, "length": length}
    try:
        layer, call = build_contender(contender, settings)
        step = Step(layer, call, settings)
        call(step.inputs(WARM_UP_LENGTH))  # builds the layer eagerly (variables outside traces)
        step.run(step.inputs(WARM_UP_LENGTH))  # first trace / compilation, warm caches
        info = step.compile(length)
        result["path"] = info.get("path", "eager")
        if "xla_temp_bytes" in info:
            result["xla_temp_mib"] = info["xla_temp_bytes"] / 2**20
            if run_limit_bytes is not None and info["xla_temp_bytes"] > run_limit_bytes:
                return result
        x = step.inputs(length, seed=1)
        memory = PeakMemory()
        if rss:
            memory.start()
        step.run(x)
        if rss:
            result["peak_mib"] = memory.peak_mib()
            result["peak_exact"] = memory.exact
        times = []
        for _ in range(settings["repeats"]):
            start = time.perf_counter()
            step.run(x)
            times.append(time.perf_counter() - start)
        result["ms"] = 1000 * statistics.median(times)
    except Exception as error:  # a failing contender is a row, not a crash
        result["error"] = summarise_error(error)
    return result


def summarise_error(error):
    """One line for a table cell: the exception's own message, without traceback lines."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    message = lines[0] if lines else ""
    # Keras wraps a layer's error: "Exception encountered when calling X.call()." then the cause.
    for i, line in enumerate(lines):
        if "Exception encountered when calling" in line and i + 1 < len(lines):
            message = lines[i + 1]
            break
    else:
        # TensorFlow's "in user code:" traceback ends with "SomeError: message".
        raised = [line for line in lines if re.match(r"^\w+(Error|Exception): ", line)]
        if raised:
            message = raised[-1]
    message = re.sub(r"^\w+(Error|Exception): ", "", message)
    return f"{type(error).__name__}: {message}"[:200]


def measure_in_fork(contender, length, settings, timeout):
    """`measure` in a forked child (fresh heap, shared imports); a dict, `error` on failure."""
    import signal

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_end)
        signal.alarm(max(1, int(timeout)))
        try:
            payload = json.dumps(measure(contender, length, settings)).encode()
        except BaseException as error:  # noqa: B036 - the child must always answer
            payload = json.dumps({"error": repr(error)[:160]}).encode()
        with os.fdopen(write_end, "wb") as f:
            f.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if data:
        return json.loads(data)
    reason = (
        f"killed by signal {os.WTERMSIG(status)}"
        if os.WIFSIGNALED(status)
        else f"exit {os.WEXITSTATUS(status)}"
    )
    return {"contender": contender, "length": length, "error": f"worker {reason}"}


def measure_in_subprocess(contender, length, args):
    """`measure` in a fresh interpreter (``--isolation spawn``)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", contender]
    command += ["--lengths", str(length), *worker_flags(settings_of(args))]
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return {"contender": contender, "length": length, "error": "timed out"}
    for line in done.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"contender": contender, "length": length, "error": tail[:160]}


# ---------------------------------------------------------------------------------------------
# The table.


def plan(args):
    """The (contender, length) measurements, shortest lengths first."""
    return [(c, n) for n in sorted(args.lengths) for c in args.contenders]


def describe_plan(args):
    lines = [
        f"attention benchmark plan: backend {os.environ.get('KERAS_BACKEND', 'tensorflow')}, "
        f"batch {args.batch}, width {args.width}, {args.heads} heads, dtype {args.dtype}, "
        f"{args.repeats} timed calls, isolation {args.isolation}",
    ]
    for contender, length in plan(args):
        scores = score_matrix_bytes(args.batch, args.heads, length) / 2**20
        lines.append(f"  {contender:>13} n={length:>6}: score matrix {scores:,.1f} MiB (float32)")
    return "\n".join(lines)


def _cell(value, digits=1):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}"


def table_rows(results, settings):
    """Markdown rows, one per result, in `HEADER`'s order."""
    ours_ms = {r["length"]: r["ms"] for r in results if r["contender"] == "ours" and "ms" in r}
    rows = []
    for r in results:
        scores = score_matrix_bytes(settings["batch"], settings["heads"], r["length"]) / 2**20
        if "error" in r:
            path = "failed: " + r["error"].replace("|", "/")
            rows.append([str(r["length"]), r["contender"], path] + ["—"] * 2 + ["—"])
            rows[-1] += [_cell(scores, 2), "—", "—"]
            continue
        ratio = r["ms"] / ours_ms[r["length"]] if r["length"] in ours_ms else None
        peak = r.get("peak_mib")
        rows.append(
            [
                str(r["length"]),
                r["contender"],
                r.get("path", "—"),
                _cell(r["ms"]),
                _cell(ratio, 2),
                _cell(peak),
                _cell(scores, 2),
                _cell(peak / scores if peak is not None else None, 2),
                _cell(r.get("xla_temp_mib")),
            ]
        )
    return rows


def growth_notes(results):
    """Per contender: how peak memory (and XLA temp) grew over the last doubling of length."""
    notes = []
    for contender in dict.fromkeys(r["contender"] for r in results):
        good = sorted(
            (r for r in results if r["contender"] == contender and "error" not in r),
            key=lambda r: r["length"],
        )
        if len(good) < 2 or good[-1]["length"] != 2 * good[-2]["length"]:
            continue
        a, b = good[-2], good[-1]
        parts = []
        for key, label in (("peak_mib", "peak RSS"), ("xla_temp_mib", "XLA temp"), ("ms", "time")):
            if a.get(key) and b.get(key):
                parts.append(f"{label} ×{b[key] / a[key]:.2f}")
        if parts:
            notes.append(f"{contender} {a['length']}→{b['length']}: " + ", ".join(parts))
    return notes


def run_plan(args):
    settings = settings_of(args)
    results = []
    for contender, length in plan(args):
        if args.isolation == "fork":
            result = measure_in_fork(contender, length, settings, args.timeout)
        else:
            result = measure_in_subprocess(contender, length, args)
        result.setdefault("contender", contender)
        result.setdefault("length", length)
        shown = result.get("error") or (
            f"{result['ms']:.1f} ms, peak {_cell(result.get('peak_mib'))} MiB"
        )
        print(f"  {contender:>13} n={length:>6}: {shown}", flush=True)
        results.append(result)
    return results


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.worker:
        print("@@" + json.dumps(measure(args.worker, args.lengths[0], settings_of(args))))
        return None
    print(describe_plan(args))
    if args.dry_run:
        return None
    sys.path.insert(0, HERE)
    from machine import cpu_description, load_average, load_note, versions
    from results import append_section, markdown_table

    started, load_at_start = time.perf_counter(), load_average()
    exact = peak_rss_works()
    # Import everything a measurement needs before forking, and run nothing: a child then
    # starts with the imports done and no backend thread pools to lose.
    import keras  # noqa: F401

    import keras_transformer  # noqa: F401

    backend, found = versions()
    if backend == "tensorflow":
        import tensorflow  # noqa: F401
    elif backend == "jax":
        import jax  # noqa: F401
    results = run_plan(args)
    settings = settings_of(args)
    table = markdown_table(HEADER, table_rows(results, settings))
    growth = growth_notes(results)
    compiled = "XLA" if args.jit or backend == "jax" else "eager"
    if backend == "tensorflow" and not args.jit:
        compiled = "tf.function without XLA"
    summary = (
        f"One self-attention layer, batch {args.batch}, width {args.width}, {args.heads} heads, "
        f"dtype policy {args.dtype}; forward + sum + gradients (input and weights), "
        f"{compiled}; median of {args.repeats} calls. `this / ours` > 1: slower than ours. "
        "Peak MiB: peak RSS above the RSS before the measured call, each measurement in a "
        f"process of its own ({args.isolation}); "
        + (
            "the peak mark reset through /proc/self/clear_refs (checked: a 64 MiB block reads "
            "as 64 MiB)"
            if exact
            else "ru_maxrss (the peak mark could not be reset: figures can be too low)"
        )
        + ". Scores MiB: one float32 (batch, heads, n, n) score matrix, "
        "4 bytes × heads × n²; `peak / scores` counts how many such matrices were alive at the "
        "peak."
    )
    paths = sorted({r["path"] for r in results if "path" in r})
    notes = [f"CPU: {cpu_description()}", summary]
    if backend == "tensorflow":
        notes.append(
            "Paths: on TensorFlow `keras.ops.dot_product_attention` has no fused kernel (Keras' "
            "TensorFlow backend refuses flash_attention=True), so ours and Keras core run the "
            "same einsum-softmax-einsum as the naive reference and keep (batch, heads, n, n) "
            "float32 matrices for the backward pass: memory O(n²). A fused (flash) kernel, "
            "JAX's cuDNN attention on an NVIDIA GPU, keeps O(n): see `benchmarks/gpu.py`."
        )
    notes.append(f"Attention paths seen: {', '.join(paths) or '—'}")
    notes.append("Growth over the last doubling: " + ("; ".join(growth) or "—"))
    elapsed = time.perf_counter() - started
    load = load_note(load_at_start) + f"; wall time {elapsed:.0f} s"
    if max(load_at_start, load_average()) > 0.5 * (os.cpu_count() or 1):
        load += " (other jobs shared the machine: times are inflated and noisy, memory is not)"
    print()
    print(table)
    print(summary)
    for note in growth:
        print("  " + note)
    if args.output:
        append_section(
            args.output,
            "Attention layer: time and peak memory against sequence length",
            "benchmarks/attention.py",
            backend,
            found,
            notes + [load],
            table,
        )
        print(f"appended to {args.output}")
    return results


if __name__ == "__main__":
    main()
