"""One prepared GPU run (one NVIDIA H100 or H200, JAX backend): training MFU, its profile,
attention memory, compilation.

What it measures, as rows of one table, inside a time budget (``--budget`` seconds; a part
the budget leaves out is a row that says so; an interrupt, as ``run_gpu.sh``'s ``timeout``
sends, ends the run with the table of what was measured, and each row is printed, as a
Markdown row, when it is measured). One lease of the GPU machine runs it in the three calls
of `LEASE_PLAN` (``--call N``; ``--plan`` prints them):

* ``train``: tokens per second (source + target tokens) and model FLOP utilisation of
  `Model.train_on_batch` (forward, backward, Adam update, label-smoothed loss, accuracy) for the
  paper's ``base`` and ``big`` translation shapes, built by
  ``keras_transformer.models.build("translation", preset=..., precision="mixed_bfloat16",
  jit_compile=True)`` (pre-norm, shared 37,000-token vocabulary, the preset's dropout), against
  the same model assembled from keras-hub's blocks (`benchmarks/translation_step.keras_hub_model`,
  compiled with our loss, metric and optimizer, so that only the blocks differ). Synthetic
  batches, no padding, at two shapes (``--shapes``): 96 x 256 tokens a side, the paper's
  token budget (it batched "approximately 25000 source tokens and 25000 target tokens";
  `token_budget_rows` takes the multiple of 8 sequences nearest 25,000 tokens: 96 x 256 =
  24,576), then 64 x 256 = 16,384, the shape of earlier runs. MFU = model FLOPs per step
  (`training_flops`: 3 x the forward matmul FLOPs, attention's QKᵀ and AV counted in full, the
  output projection included) / step time / peak, against two peaks: the device's dense bf16
  datasheet figure (`datasheet_peak`, from the device kind JAX reports: 989 TFLOP/s for the
  H100 SXM and the H200; none for a device it does not know, whose column is then empty) and
  the bf16 matmul peak measured in this process (`machine.matmul_peak_gflops`, 8192 x 8192).
  Attention kernel: ours calls `keras.ops.dot_product_attention` with ``flash_attention=None``,
  which on an Ampere-or-later GPU picks JAX's cuDNN fused (flash) attention where the mask
  allows; keras-hub's blocks put dropout on the attention probabilities, and Keras'
  `MultiHeadAttention` then takes its explicit path, so they run O(n²) attention.
* ``profile``: where the ``big`` train step's device time goes, ours and keras-hub's, at the
  first training shape: a few steps under `jax.profiler.trace`, whose trace-event file
  `gpu_profile.device_op_table` reads with the standard library, summing the device events by
  kernel name. Rows: the kernel time per step against the traced step's wall time, and the
  shares by kind of kernel (matmul, attention, fusions, copies); below the table, the top 15
  kernels of each. With ``train`` in the same run the profile traces the models ``train``
  has just timed, so nothing is compiled twice. On a CPU the trace has host events only, and
  the rows say so.
* ``attention``: one attention layer's forward+backward (`benchmarks/attention.py`'s `measure`)
  at 8,192, 16,384 and 32,768 tokens, width 512, 8 heads, bfloat16, full and causal (ours,
  ours_causal, Keras core, a naive einsum-softmax): milliseconds and XLA's temporary bytes for
  the compiled step (exact), with the path read from the compiled program (``cuDNN fused`` or
  the einsum-softmax). A step whose temporaries would not fit is compiled but not run.
* ``fit``: a short real training run, `Model.fit` of the ``base`` translation model over
  ``fit_steps`` batches of varied sentence lengths in the fixed shapes of
  `make_translation_dataset(fixed_shapes=True)` (`fit_batch_shapes`: 8,192 tokens a side in
  batches padded to 16, 24, 32, 48 or 64 tokens, fewer with ``--fit-max-length``; the ids are
  random, since the GPU machine has no TensorFlow to tokenize text), with JAX's persistent
  compilation cache on (`examples/compilation_cache.py`, in a new folder under
  ``runs/gpu_compilation_cache``, or ``--compilation-cache-dir``). Reported apart: the train
  step's programs and the seconds XLA spent compiling or loading them (`jax.monitoring`), the
  first step of each shape, the median later step (its real, unpadded tokens give the tokens
  per second); then the same for a second process that runs the same fit with the same cache
  folder, as a user's second run of a training command does. ``--no-compilation-cache``
  turns the cache off (and the second process with it).
* ``generate``: cached greedy decoding tokens per second at batch 1 and 64 (the base shape,
  float32 weights, 32 source tokens, 64 new tokens), ours against keras-hub's caches and
  `GreedySampler` (`benchmarks/generation.py`'s `make_runners`); not in the lease plan.

``--dry-run`` runs the same code end to end on the CPU with tiny shapes (about a minute; the
test suite runs it), without flash attention, the datasheet peak or device events.

Run it on the GPU machine (Keras and keras-hub travel as wheels: see `benchmarks/run_gpu.sh`,
which holds the download, install and run commands)::

    bash benchmarks/run_gpu.sh --plan                   # the lease's calls and their limits
    bash benchmarks/run_gpu.sh --call 1                 # then 2, 3: one device call each
    KERAS_BACKEND=jax python benchmarks/gpu.py --dry-run --output ''   # CPU check
"""

import argparse
import functools
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

VOCABULARY = 37000  # the paper's shared English-German vocabulary
TOKEN_BUDGET = 25000  # the paper's tokens a side per training batch (section 5.1)
# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's datasheets, by the device kind JAX
# reports ("NVIDIA H100 80GB HBM3", "NVIDIA H200"). The PCIe and NVL cards run at lower clocks
# and power, with lower peaks, and a GH200 is not an H200: those stay unknown, not guessed.
DATASHEET_BF16_TFLOPS = (
    (r"\bH100\b(?!.*\b(PCIe|NVL)\b)", "H100 SXM", 989.0),
    (r"\bH200\b(?!.*\bNVL\b)", "H200", 989.0),
)

# One lease of the GPU machine: 15 minutes of device time, machine start included, each device
# call at most 10 minutes. The calls below take at most 5 minutes each and 12 minutes together
# (`timeout_s`, what the device tool is given). Estimates, from the H200 run of 2026-12-04:
# about 50 s to build a model and compile its train step, 30 s of XLA per fit batch shape, a
# few seconds for each attention measurement; so the fit runs over 2 shapes, not 5. Each call
# starts with what is new (the token-budget shape), so that what a short budget leaves out is
# what earlier runs measured.
LEASE_PLAN = (
    dict(
        flags=("--parts", "fit,attention", "--fit-max-length", "24"),
        timeout_s=210,
        what="fit over 2 batch shapes with the compilation cache, then a second process; "
        "attention at 8k-32k tokens, full and causal",
    ),
    dict(
        flags=("--parts", "train,profile", "--presets", "big"),
        timeout_s=260,
        what="train big at 96x256 and 64x256, ours and keras-hub's; the per-op profile of "
        "both at 96x256",
    ),
    dict(
        flags=("--parts", "train", "--presets", "base"),
        timeout_s=250,
        what="train base at 96x256 and 64x256, ours and keras-hub's",
    ),
)
CALL_LIMIT_S = 300
LEASE_LIMIT_S = 720
# `run_gpu.sh` interrupts gpu.py 15 s before the call's `timeout_s` (and kills it 8 s later);
# gpu.py stops measuring 10 s before that, to print and write its table. Run without
# `run_gpu.sh`, `--call N` sets the same budget, from the call's start.
BUDGET_BEFORE_S = 25
# Seconds a measurement is expected to take on the GPU, before this process has timed one:
# a part starts one only where the budget has that much left.
EXPECTED_S = dict(train=50, fit_shape=32, second_process=35, attention=6, generate=30)

HEADER = [
    "part",
    "shape",
    "contender",
    "tokens/s",
    "this / ours",
    "ms",
    "MFU (datasheet peak)",
    "MFU (measured peak)",
    "memory GiB",
    "note",
]
PARTS = ("fit", "train", "profile", "attention", "generate")
SECOND_PROCESS_MARK = "second-process fit: "
FULL = dict(
    presets=("big", "base"),  # big first: the MFU target is on it
    vocabulary=VOCABULARY,
    shapes=((96, 256), (64, 256)),  # token_budget_rows(256) x 256, then the earlier runs' shape
    steps=10,
    attention_lengths=(8192, 16384, 32768),
    attention=dict(batch=1, width=512, heads=8, dtype="mixed_bfloat16", repeats=3, jit=True),
    attention_contenders=("ours", "ours_causal", "keras", "naive"),
    generation=dict(vocab=VOCABULARY, hidden=512, heads=8, ff=2048, layers=6, source=32),
    new_tokens=64,
    generation_batches=(1, 64),
    calls=3,
    peak_size=8192,
    peak_seconds=2.0,
    fit=dict(preset="base", tokens_per_batch=8192, max_length=64, steps=60),
    profile=dict(preset="big", steps=3, top=15),
    expected=EXPECTED_S,
)
DRY_RUN = dict(
    FULL,
    presets=("tiny",),
    vocabulary=64,
    # One shape: each more costs two compilations of the train step on the CPU (the tests
    # check the loop over shapes and presets on stand-in measurements).
    shapes=((3, 8),),
    steps=2,
    attention_lengths=(16,),
    attention=dict(batch=1, width=32, heads=2, dtype="mixed_bfloat16", repeats=1, jit=True),
    generation=dict(vocab=64, hidden=32, heads=2, ff=64, layers=1, source=6),
    new_tokens=4,
    generation_batches=(2,),
    calls=1,
    peak_size=256,
    peak_seconds=0.2,
    fit=dict(preset="tiny", tokens_per_batch=96, max_length=24, steps=8),
    profile=dict(preset="tiny", steps=2, top=15),
    expected={name: 0 for name in EXPECTED_S},
)


def token_budget_rows(length, tokens=TOKEN_BUDGET, multiple=8):
    """Sequences of `length` tokens per batch nearest `tokens` a side, a multiple of `multiple`.

    Rows in multiples of 8 keep the matmuls' row counts on the GPU's tile sizes:
    ``token_budget_rows(256)`` is 96 (24,576 tokens), against 98 (25,088) unrounded.
    """
    return max(multiple, multiple * round(tokens / length / multiple))


def datasheet_peak(device_kind):
    """`(TFLOP/s, name)`: the dense bf16 datasheet peak of a device kind, or `None`."""
    for pattern, name, tflops in DATASHEET_BF16_TFLOPS:
        if re.search(pattern, device_kind or ""):
            return tflops, name
    return None


def plan_lines():
    """The lease's device calls, one line each, as `run_gpu.sh --plan` prints them."""
    lines = []
    for number, call in enumerate(LEASE_PLAN, 1):
        lines.append(
            f"call {number}: bash benchmarks/run_gpu.sh --call {number}  "
            f"(timeout_s {call['timeout_s']}): {call['what']}"
        )
    total = sum(call["timeout_s"] for call in LEASE_PLAN)
    lines.append(
        f"together: {total} s of calls ({total / 60:.1f} of the lease's 15 minutes, machine "
        f"start and transfers apart); each call at most {CALL_LIMIT_S} s"
    )
    for number in range(1, len(LEASE_PLAN) + 1):
        args = parse_args(["--call", str(number)])
        lines.append(
            f"call {number}: {', '.join(args.parts)}; measuring budget {args.budget:.0f} s, "
            f"estimated {estimated_seconds(args):.0f} s (EXPECTED_S in benchmarks/gpu.py)"
        )
    return lines


def estimated_seconds(args):
    """What `args`' parts should take on the GPU, by `EXPECTED_S`: what the plan is sized by."""
    settings, parts = args.settings, args.parts
    models = 2 * len(settings["presets"]) * len(settings["shapes"])  # ours and keras-hub's
    total = 0
    if "train" in parts:
        total += models * EXPECTED_S["train"]
    if "profile" in parts and not (
        "train" in parts and settings["profile"]["preset"] in settings["presets"]
    ):
        total += 2 * EXPECTED_S["train"]  # builds and compiles its own two models
    if "fit" in parts:
        fit = settings["fit"]
        shapes = fit_batch_shapes(fit["tokens_per_batch"], fit["max_length"])
        total += len(shapes) * EXPECTED_S["fit_shape"]
        total += 0 if args.no_compilation_cache else EXPECTED_S["second_process"]
    if "attention" in parts:
        attention = len(settings["attention_lengths"]) * len(settings["attention_contenders"])
        total += attention * EXPECTED_S["attention"]
    if "generate" in parts:
        total += len(settings["generation_batches"]) * EXPECTED_S["generate"]
    return total


def parse_shape(text):
    rows, _, length = text.lower().partition("x")
    shape = int(rows), int(length)
    if min(shape) < 1:
        raise ValueError(text)
    return shape


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument(
        "--call",
        type=int,
        default=None,
        help=f"run call N (1-{len(LEASE_PLAN)}) of the lease plan: its parts, presets and "
        "budget; flags after it override them",
    )
    parser.add_argument("--plan", action="store_true", help="print the lease plan and exit")
    parser.add_argument(
        "--call-timeout",
        type=int,
        default=None,
        metavar="N",
        help="print call N's timeout_s (for run_gpu.sh) and exit",
    )
    parser.add_argument("--budget", type=float, default=210.0, help="seconds for all parts")
    parser.add_argument("--parts", default="fit,train,profile,attention,generate")
    parser.add_argument("--presets", default=None, help="train presets, e.g. big,base")
    parser.add_argument(
        "--shapes",
        default=None,
        help="training shapes ROWSxLENGTH, e.g. 96x256,64x256 (the first is profiled)",
    )
    parser.add_argument("--batch", type=int, default=None, help="one training shape: rows")
    parser.add_argument("--length", type=int, default=None, help="one training shape: length")
    parser.add_argument("--steps", type=int, default=None, help="timed training steps")
    parser.add_argument(
        "--fit-max-length",
        type=int,
        default=None,
        help="the fit part's longest batch shape (64: 5 shapes, 24: 2)",
    )
    parser.add_argument(
        "--no-compilation-cache",
        action="store_true",
        help="fit without JAX's persistent compilation cache, and without a second process",
    )
    parser.add_argument(
        "--compilation-cache-dir",
        default=None,
        help="the cache folder (default: a new folder under runs/gpu_compilation_cache, "
        "removed at the end); the first process is cold only if it is empty",
    )
    parser.add_argument(
        "--profile-dir",
        default=None,
        help="where the profiler traces go (default: runs/gpu_profile/<time>)",
    )
    parser.add_argument("--second-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "RESULTS.md"),
        help="Markdown file to append the table to ('' to skip)",
    )
    args, _ = parser.parse_known_args(argv)
    for number in (args.call, args.call_timeout):
        if number is not None and not 1 <= number <= len(LEASE_PLAN):
            parser.error(f"the lease plan has calls 1-{len(LEASE_PLAN)}")
    if args.call is not None:
        call = LEASE_PLAN[args.call - 1]
        budget = call["timeout_s"] - BUDGET_BEFORE_S
        # The plan's flags first, so that the command line's own flags win.
        argv = [*call["flags"], "--budget", str(budget), *argv]
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown or not args.parts:
        parser.error(f"--parts: unknown {unknown}; choose from {','.join(PARTS)}")
    args.settings = dict(DRY_RUN if args.dry_run else FULL)
    settings = args.settings
    if args.presets:
        settings["presets"] = tuple(p.strip() for p in args.presets.split(",") if p.strip())
    if args.shapes:
        try:
            settings["shapes"] = tuple(parse_shape(s) for s in args.shapes.split(",") if s)
        except ValueError:
            parser.error("--shapes: ROWSxLENGTH[,ROWSxLENGTH...], e.g. 96x256,64x256")
    for name in ("batch", "length", "steps", "fit_max_length"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.batch or args.length:
        rows, length = settings["shapes"][0]
        settings["shapes"] = ((args.batch or rows, args.length or length),)
    if args.steps:
        settings["steps"] = args.steps
    if args.fit_max_length:
        settings["fit"] = dict(settings["fit"], max_length=args.fit_max_length)
    if args.budget <= 0:
        parser.error("--budget must be positive")
    return args


def training_flops(size, vocabulary, batch, source, target):
    """Model FLOPs of one training step (3 x forward) of the encoder-decoder at `size`.

    Counts the matmuls: per encoder layer and source token the four attention projections
    (4d²), the feed-forward (2 d d_ff) and QKᵀ, AV over `source` keys (2 source d); per decoder
    layer and target token the self-attention (4d² + 2 target d, causal counted in full), the
    cross-attention's query and output projections (2d²) and QKᵀ, AV over the source
    (2 source d), the feed-forward; the cross-attention's key and value projections per source
    token (2d² per decoder layer); the output projection (d V per target token). Each
    multiply-add is 2 FLOPs; the backward pass is twice the forward.
    """
    d, ff, layers = size["hidden_dim"], size["intermediate_dim"], size["num_layers"]
    encoder = source * (4 * d * d + 2 * d * ff + 2 * source * d)
    decoder = target * (4 * d * d + 2 * target * d + 2 * d * d + 2 * source * d + 2 * d * ff)
    cross_keys = source * 2 * d * d
    forward = 2 * batch * (layers * (encoder + decoder + cross_keys) + target * d * vocabulary)
    return 3 * forward


class Budget:
    def __init__(self, seconds):
        self.end = time.perf_counter() + seconds

    def left(self):
        return self.end - time.perf_counter()


class Run:
    """What the parts share: settings, budget, peaks, the rows and what they learned."""

    def __init__(self, args, budget, peak_tflops=None, datasheet=None):
        self.args, self.settings, self.budget = args, args.settings, budget
        self.peak_tflops, self.datasheet = peak_tflops, datasheet
        self.rows, self.profiles, self.taken = [], {}, {}
        self.compilation_cache = None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.profile_dir = args.profile_dir or os.path.join(ROOT, "runs", "gpu_profile", stamp)

    def expected(self, kind):
        """Seconds the next measurement of `kind` should take: the longest seen so far."""
        return max(self.taken.get(kind, [self.settings["expected"][kind]]))

    def fits(self, kind, count=1):
        return self.budget.left() >= count * self.expected(kind)

    def took(self, kind, seconds):
        self.taken.setdefault(kind, []).append(seconds)

    def add(self, **cells):
        self.rows.append(row(**cells))
        # Printed as measured: a call the device tool kills still leaves its rows in the log.
        print("row: | " + " | ".join(format_rows(self.rows[-1:])[0]) + " |", flush=True)


def free_memory():
    import keras

    keras.backend.clear_session()
    gc.collect()


def row(part, shape, contender, **cells):
    return dict(part=part, shape=shape, contender=contender, **cells)


# ---------------------------------------------------------------------------------------------
# Training throughput and MFU.


def build_translation(contender, preset, settings):
    """Ours from `models.build`, or keras-hub's blocks compiled with the same recipe."""
    import keras

    import keras_transformer as kt
    from keras_transformer.models.presets import PRESETS

    model = kt.models.build(
        "translation",
        preset=preset,
        precision="mixed_bfloat16",
        jit_compile=True,
        source_vocabulary_size=settings["vocabulary"],
        share_embeddings=True,
        norm_first=True,
    )
    if contender == "ours":
        return model
    from translation_step import keras_hub_model

    from keras_transformer.training.metrics import MaskedAccuracy

    block_settings = dict(preset=preset, dropout=PRESETS[preset]["dropout"], norm_first=True)
    hub = keras_hub_model(block_settings, settings["vocabulary"], "mixed_bfloat16")
    hub.compile(
        optimizer=keras.optimizers.deserialize(keras.optimizers.serialize(model.optimizer)),
        loss=model.loss,
        metrics=[MaskedAccuracy(0)],
        jit_compile=True,
    )
    return hub


def synthetic_batch(vocabulary, shape, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = lambda: rng.integers(3, vocabulary, shape).astype("int32")  # noqa: E731
    return {"encoder_token_ids": ids(), "decoder_token_ids": ids()}, ids()


def shape_label(preset, shape):
    return f"{preset}, {shape[0]}x{shape[1]}"


def measure_training(preset, contender, settings, shape, trace_folder=None):
    """Step time of `train_on_batch` at `shape`; with `trace_folder`, a profile of a few more."""
    from gpu_profile import device_op_table, trace_steps

    from keras_transformer.models.presets import PRESETS

    started = time.perf_counter()
    model = build_translation(contender, preset, settings)
    train = model.train_on_batch  # returns floats: waits for the step
    inputs, labels = synthetic_batch(settings["vocabulary"], shape)
    start = time.perf_counter()
    train(inputs, labels)  # compiles
    compile_s = time.perf_counter() - start
    train(inputs, labels)
    times = []
    for _ in range(settings["steps"]):
        start = time.perf_counter()
        train(inputs, labels)
        times.append(time.perf_counter() - start)
    batch, length = shape
    found = dict(
        seconds=statistics.median(times),
        flops=training_flops(PRESETS[preset], settings["vocabulary"], batch, length, length),
        params=model.count_params(),
        compile_s=compile_s,
    )
    step = None
    if trace_folder:
        steps = settings["profile"]["steps"]
        try:
            step = functools.partial(train, inputs, labels)
            path, seconds = trace_steps(step, trace_folder, steps)
            table = device_op_table(path, steps, settings["profile"]["top"]) if path else None
            found["profile"] = dict(
                table=table, step_ms=1000 * seconds / steps, steps=steps, path=path
            )
        except Exception as error:  # a failed trace is a row, the timing still counts
            found["profile"] = dict(error=failure(error))
    del model, train, step
    free_memory()
    found["wall_s"] = time.perf_counter() - started
    return found


def training_rows(run):
    settings = run.settings
    profile_preset = settings["profile"]["preset"]
    trace = "profile" in run.args.parts
    for shape in settings["shapes"]:
        for preset in settings["presets"]:
            ours = None
            for contender in ("ours", "keras_hub"):
                label = shape_label(preset, shape)
                if not run.fits("train"):
                    run.add(part="train", shape=label, contender=contender, note="skipped: budget")
                    continue
                # The profile reads the first shape's big models, timed here: no second compile.
                profiled = trace and preset == profile_preset and shape == settings["shapes"][0]
                folder = (
                    os.path.join(run.profile_dir, f"{contender}-{preset}-{shape[0]}x{shape[1]}")
                    if profiled
                    else None
                )
                try:
                    found = measure_training(preset, contender, settings, shape, folder)
                except Exception as error:
                    free_memory()
                    run.add(part="train", shape=label, contender=contender, note=failure(error))
                    continue
                run.took("train", found["wall_s"])
                if "profile" in found:
                    run.profiles[contender] = dict(found["profile"], preset=preset, shape=shape)
                ours = found if contender == "ours" else ours
                seconds, flops = found["seconds"], found["flops"]
                run.add(
                    part="train",
                    shape=label,
                    contender=contender,
                    tokens=2 * shape[0] * shape[1] / seconds,
                    ratio=seconds / ours["seconds"] if ours else None,
                    ms=1000 * seconds,
                    mfu=flops / seconds / (run.datasheet[0] * 1e12) if run.datasheet else None,
                    mfu_measured=(
                        flops / seconds / (run.peak_tflops * 1e12) if run.peak_tflops else None
                    ),
                    note=f"{found['params'] / 1e6:.1f}M params, {flops / 1e12:.2f} TFLOP/step, "
                    f"compile {found['compile_s']:.0f} s",
                )


# ---------------------------------------------------------------------------------------------
# Where the big train step's device time goes.


def profile_rows(run):
    """A row per contender from its trace; traces what `training_rows` did not."""
    settings = run.settings
    preset, shape = settings["profile"]["preset"], settings["shapes"][0]
    label = shape_label(preset, shape)
    ours_ms = None
    for contender in ("ours", "keras_hub"):
        found = run.profiles.get(contender)
        if found is None or found.get("preset") != preset or found.get("shape") != shape:
            if not run.fits("train"):
                run.add(part="profile", shape=label, contender=contender, note="skipped: budget")
                continue
            folder = os.path.join(run.profile_dir, f"{contender}-{preset}-{shape[0]}x{shape[1]}")
            quick = dict(settings, steps=2)  # the step time is train's; this is for the trace
            try:
                measured = measure_training(preset, contender, quick, shape, folder)
            except Exception as error:
                free_memory()
                run.add(part="profile", shape=label, contender=contender, note=failure(error))
                continue
            run.took("train", measured["wall_s"])
            found = run.profiles[contender] = dict(measured["profile"], preset=preset, shape=shape)
        if "error" in found:
            run.add(part="profile", shape=label, contender=contender, note=found["error"])
            continue
        table = found["table"]
        if table is None:
            run.add(part="profile", shape=label, contender=contender, note="no trace file written")
            continue
        if not table["rows"]:
            run.add(part="profile", shape=label, contender=contender, note=table["message"])
            continue
        device_ms = table["device_ms"]
        ours_ms = device_ms if contender == "ours" else ours_ms
        top = table["rows"][0]
        run.add(
            part="profile",
            shape=label,
            contender=contender,
            ratio=device_ms / ours_ms if ours_ms else None,
            ms=device_ms,
            note=f"kernel time per step, of {found['step_ms']:,.1f} ms per traced step "
            f"({found['steps']} steps); {kinds_text(table)}; top kernel {top['name'][:40]} "
            f"{top['share']:.1%}",
        )


def kinds_text(table):
    from gpu_profile import kinds_line

    return kinds_line(table)


def profile_tables(run):
    """Markdown below the main table: each contender's top device ops, or why there are none."""
    from gpu_profile import PROFILE_HEADER, markdown_rows
    from results import markdown_table

    parts = []
    for contender, found in run.profiles.items():
        if "error" in found or found.get("table") is None:
            continue
        table = found["table"]
        label = shape_label(found["preset"], found["shape"])
        count = f"Top {len(table['rows'])} device kernels" if table["rows"] else "Device kernels"
        text = (
            f"{count} of the {label} train step, {contender} ({found['steps']} traced steps; "
            f"`benchmarks/gpu_profile.py`): {table['message']}"
        )
        text += f". By kind: {kinds_text(table)}." if table["rows"] else "."
        if table["rows"]:
            text += "\n\n" + markdown_table(PROFILE_HEADER, markdown_rows(table))
        parts.append(text)
    return parts


# ---------------------------------------------------------------------------------------------
# Attention memory at long sequences.


def attention_rows(run):
    import jax
    from attention import measure

    settings = run.settings
    config = settings["attention"]
    # A step whose temporaries would not fit beside what is allocated is compiled, not run:
    # the limit follows the device's memory (an H100 has 80 GB, an H200 141 GB).
    stats = jax.devices()[0].memory_stats() or {}
    limit = stats["bytes_limit"] - 4 * 2**30 if "bytes_limit" in stats else 100 * 2**30
    for length in settings["attention_lengths"]:
        ours_ms = None
        for contender in settings["attention_contenders"]:
            shape = f"n={length}, {config['heads']} heads, width {config['width']}"
            if not run.fits("attention"):
                run.add(part="attention", shape=shape, contender=contender, note="skipped: budget")
                continue
            start = time.perf_counter()
            found = measure(contender, length, config, rss=False, run_limit_bytes=limit)
            free_memory()
            run.took("attention", time.perf_counter() - start)
            if "error" in found:
                run.add(part="attention", shape=shape, contender=contender, note=found["error"])
                continue
            if contender == "ours":
                ours_ms = found.get("ms")
            memory = found.get("xla_temp_mib")
            run.add(
                part="attention",
                shape=shape,
                contender=contender,
                tokens=length * config["batch"] / found["ms"] * 1000 if "ms" in found else None,
                ratio=found["ms"] / ours_ms if ours_ms and "ms" in found else None,
                ms=found.get("ms"),
                memory=memory / 1024 if memory is not None else None,
                note=found["path"] + ("" if "ms" in found else "; not run (memory)"),
            )


# ---------------------------------------------------------------------------------------------
# Cached greedy generation.


def generation_rows(run):
    from generation import make_runners

    settings = run.settings
    for batch in settings["generation_batches"]:
        shape = dict(settings["generation"], batch=batch, new_tokens=settings["new_tokens"])
        label = f"base, batch {batch}, {settings['new_tokens']} new"
        if not run.fits("generate"):
            for contender in ("ours", "keras_hub"):
                run.add(part="generate", shape=label, contender=contender, note="skipped: budget")
            continue
        start = time.perf_counter()
        try:
            runners = make_runners(shape, True, ["ours_greedy", "keras_hub_greedy"])
        except Exception as error:
            run.add(part="generate", shape=label, contender="ours", note=failure(error))
            continue
        ours_rate = None
        for name, contender in (("ours_greedy", "ours"), ("keras_hub_greedy", "keras_hub")):
            runner, rows_per_call = runners[name]
            try:
                runner(warm_up=True)
                steps, begin = 0, time.perf_counter()
                for _ in range(settings["calls"]):
                    steps += runner()
                seconds = time.perf_counter() - begin
            except Exception as error:
                run.add(part="generate", shape=label, contender=contender, note=failure(error))
                continue
            rate = rows_per_call * steps / seconds
            ours_rate = rate if contender == "ours" else ours_rate
            run.add(
                part="generate",
                shape=label,
                contender=contender,
                tokens=rate,
                ratio=ours_rate / rate if ours_rate else None,
                ms=1000 * seconds / settings["calls"],
                note="greedy, cached, float32 weights",
            )
        del runners
        free_memory()
        run.took("generate", time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# A short training run over the fixed shapes: compilation apart, in a first and a second
# process with JAX's persistent compilation cache.


def fit_batch_shapes(tokens_per_batch, max_length, min_length=16):
    """`(rows, length)` per length, as `translation_batch_shapes` of the translation pipeline.

    Written out here because `keras_transformer.text` needs TensorFlow, which the GPU
    machine lacks; a test checks that both give the same shapes.
    """
    lengths, power = [], 1
    while power < max_length:
        lengths += [n for n in (power, power + power // 2) if min_length <= n < max_length]
        power *= 2
    lengths = sorted(set(lengths)) + [max_length]
    return [(max(1, tokens_per_batch // length), length) for length in lengths]


def fit_batches(shapes, steps, vocabulary, seed=0):
    """`steps` padded batches, each shape in turn, sentences of random lengths in its bucket."""
    import numpy as np

    rng = np.random.default_rng(seed)
    batches, real_tokens = [], []
    for step in range(steps):
        (rows, length), shorter = shapes[step % len(shapes)], 0
        if step % len(shapes):
            shorter = shapes[step % len(shapes) - 1][1]
        # Every sequence of the bucket is longer than the previous bucket's length.
        lengths = rng.integers(shorter + 1, length + 1, size=(3, rows))
        ids = rng.integers(4, vocabulary, size=(3, rows, length)).astype("int32")
        ids[np.arange(length)[None, None, :] >= lengths[..., None]] = 0
        batches.append(({"encoder_token_ids": ids[0], "decoder_token_ids": ids[1]}, ids[2]))
        real_tokens.append(int(lengths[0].sum() + lengths[2].sum()))
    return batches, real_tokens


def measure_fit(settings):
    """One `Model.fit` over the fixed shapes: a dict of its compilation and step figures."""
    import jax.monitoring
    import keras

    import keras_transformer as kt
    from examples.compilations import CompilationCounter

    config = settings["fit"]
    shapes = fit_batch_shapes(config["tokens_per_batch"], config["max_length"])
    batches, real_tokens = fit_batches(shapes, config["steps"], settings["vocabulary"])

    class StepTimes(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])  # waits for the step
            times.append(time.perf_counter() - self.started)

    cache = dict(hits=0, misses=0)

    def count(event, **kwargs):  # every program of the process, not only the train step's
        if event == "/jax/compilation_cache/cache_hits":
            cache["hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":
            cache["misses"] += 1

    times, counter = [], CompilationCounter()
    jax.monitoring.register_event_listener(count)
    try:
        model = kt.models.build(
            "translation",
            preset=config["preset"],
            precision="mixed_bfloat16",
            jit_compile=True,
            source_vocabulary_size=settings["vocabulary"],
            share_embeddings=True,
            norm_first=True,
        )
        start = time.perf_counter()
        model.fit(
            (batch for batch in batches),
            steps_per_epoch=len(batches),
            epochs=1,
            verbose=0,
            callbacks=[counter, StepTimes()],
        )
        seconds = time.perf_counter() - start
    finally:
        jax.monitoring.unregister_event_listener(count)
    del model
    free_memory()
    first, later = times[: len(shapes)], times[len(shapes) :]
    real = real_tokens[len(shapes) :]
    epoch = counter.epochs[0]
    return dict(
        shapes=len(shapes),
        compiled=epoch["train"],
        compile_s=epoch["train_seconds"],
        # Programs of the steps JAX found in the persistent cache, loaded instead of compiled.
        loaded=epoch.get("loaded", 0),
        loaded_s=epoch.get("loaded_seconds", 0.0),
        first_steps_s=sum(first),
        step_ms=1000 * statistics.median(later or first),
        tokens=statistics.median(t / s for t, s in zip(real, later)) if later else None,
        fit_s=seconds,
        cache_hits=cache["hits"],
        cache_misses=cache["misses"],
    )


def second_process_fit(run, timeout):
    """`measure_fit` in a new interpreter with the same cache folder: its dict, or `error`."""
    settings = run.settings
    command = [sys.executable, os.path.abspath(__file__), "--second-process", "--parts", "fit"]
    command += ["--output", "", "--compilation-cache-dir", run.compilation_cache]
    command += ["--fit-max-length", str(settings["fit"]["max_length"])]
    command += ["--dry-run"] if run.args.dry_run else []
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=os.environ
        )
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {timeout:.0f} s")
    for line in done.stdout.splitlines():
        if line.startswith(SECOND_PROCESS_MARK):
            print(line, flush=True)
            return dict(
                json.loads(line[len(SECOND_PROCESS_MARK) :]), process_s=time.perf_counter() - start
            )
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return dict(error=f"exit {done.returncode}: {tail[:160]}")


def compile_text(found):
    """A process's compilation figures, for the fit row's note."""
    text = f"{found['compiled']} compilations of the train step ({found['compile_s']:.1f} s of XLA)"
    if found["loaded"]:
        text += f", {found['loaded']} loaded from the cache ({found['loaded_s']:.1f} s)"
    text += (
        f"; first step of each shape {found['first_steps_s']:.1f} s in all, whole fit "
        f"{found['fit_s']:.1f} s"
    )
    if found["cache_hits"] or found["cache_misses"]:  # the cache was on
        text += f"; cache: {found['cache_hits']} hits, {found['cache_misses']} misses"
    return text


def fit_rows(run):
    settings = run.settings
    config = settings["fit"]
    shapes = fit_batch_shapes(config["tokens_per_batch"], config["max_length"])
    label = (
        f"{config['preset']}, {config['tokens_per_batch']} tokens, {len(shapes)} shapes, "
        f"{config['steps']} steps"
    )
    if not run.fits("fit_shape", len(shapes)):
        run.add(part="fit", shape=label, contender="ours", note="skipped: budget")
        return
    try:
        first = measure_fit(settings)
    except Exception as error:
        free_memory()
        run.add(part="fit", shape=label, contender="ours", note=failure(error))
        return
    note = f"first process: {compile_text(first)}"
    if run.compilation_cache is None:
        note += "; no compilation cache (--no-compilation-cache), no second process"
    elif not run.fits("second_process"):
        note += "; second process: skipped (budget)"
    else:
        second = second_process_fit(run, timeout=max(30.0, run.budget.left()))
        if "error" in second:
            note += f"; second process failed: {second['error']}"
        else:
            note += (
                f"; second process ({second['process_s']:.0f} s, imports included), same "
                f"cache folder: {compile_text(second)}"
            )
    run.add(
        part="fit",
        shape=label,
        contender="ours",
        tokens=first["tokens"],
        ms=first["step_ms"],
        note=note + "; tokens/s: unpadded source + target tokens of the later steps",
    )


# ---------------------------------------------------------------------------------------------
# The table.


def failure(error):
    from attention import summarise_error

    return "failed: " + summarise_error(error)


def format_rows(rows):
    def cell(value, spec):
        return "—" if value is None else format(value, spec)

    return [
        [
            r["part"],
            r["shape"],
            r["contender"],
            cell(r.get("tokens"), ",.0f"),
            cell(r.get("ratio"), ".2f"),
            cell(r.get("ms"), ",.1f"),
            cell(r.get("mfu"), ".1%"),
            cell(r.get("mfu_measured"), ".1%"),
            cell(r.get("memory"), ",.2f"),
            r.get("note", "").replace("|", "/"),
        ]
        for r in rows
    ]


def start_compilation_cache(args):
    """The cache folder the fit part shares with its second process, or `None` (off).

    Turned on before anything compiles: JAX decides once per process, at its first
    compilation, whether it uses the cache.
    """
    if "fit" not in args.parts or args.no_compilation_cache:
        return None
    from examples.compilation_cache import enable_compilation_cache

    folder = args.compilation_cache_dir
    if folder is None:  # a new, empty folder: the first process compiles cold
        parent = os.path.join(ROOT, "runs", "gpu_compilation_cache")
        os.makedirs(parent, exist_ok=True)
        folder = tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=parent)
    return enable_compilation_cache(folder)


def main(argv=None):
    args = parse_args(argv)
    if args.plan:
        print("\n".join(plan_lines()))
        return []
    if args.call_timeout is not None:
        print(LEASE_PLAN[args.call_timeout - 1]["timeout_s"])
        return []
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.perf_counter()
    budget = Budget(args.budget)
    import jax
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(
            f"benchmarks/gpu.py runs on JAX; KERAS_BACKEND is {keras.backend.backend()}"
        )
    cache = start_compilation_cache(args)
    if args.second_process:  # the fit part's second process: its figures, for the first
        found = measure_fit(args.settings)
        found["tensorflow_imported"] = sys.modules.get("tensorflow") is not None
        print(SECOND_PROCESS_MARK + json.dumps(found), flush=True)
        return found
    from machine import cpu_description, load_average, matmul_peak_gflops, versions
    from results import append_section, markdown_table

    device = jax.devices()[0]
    on_gpu = device.platform == "gpu"
    if not on_gpu and not args.dry_run:
        raise SystemExit(f"no GPU ({device}); use --dry-run to check the script on a CPU")
    settings = args.settings
    datasheet = datasheet_peak(device.device_kind) if on_gpu else None
    peak = None
    if {"train", "profile"} & set(args.parts):
        peak = matmul_peak_gflops("bfloat16", settings["peak_size"], settings["peak_seconds"])
        peak /= 1000
    print(
        f"device {device.device_kind}; datasheet peak "
        + (f"{datasheet[0]:.0f} TFLOP/s ({datasheet[1]})" if datasheet else "unknown")
        + (f"; bf16 matmul peak {peak:,.1f} TFLOP/s" if peak else ""),
        flush=True,
    )
    run = Run(args, budget, peak, datasheet)
    run.compilation_cache = cache
    if cache:
        removed = " (removed at the end)" if args.compilation_cache_dir is None else ""
        print(f"compilation cache: {cache}{removed}", flush=True)
    parts = dict(
        train=training_rows,
        profile=profile_rows,
        attention=attention_rows,
        generate=generation_rows,
        fit=fit_rows,
    )
    interrupted = None
    try:
        for part in args.parts:
            parts[part](run)
    except KeyboardInterrupt:  # `timeout -s INT` in run_gpu.sh: keep what was measured
        interrupted = f"interrupted after {time.perf_counter() - started:.0f} s"
        run.rows.append(row(part, "—", "—", note=interrupted))
    finally:
        if cache and args.compilation_cache_dir is None:
            shutil.rmtree(cache, ignore_errors=True)
    table = markdown_table(HEADER, format_rows(run.rows))
    extra = profile_tables(run)
    backend, found = versions()
    elapsed = time.perf_counter() - started
    notes = [
        f"Device: {device.device_kind} ({device.platform}); host CPU: {cpu_description()}",
        (
            f"MFU (datasheet peak): against {datasheet[0]:.0f} TFLOP/s, the {datasheet[1]}'s "
            "dense bf16 datasheet figure"
            if datasheet
            else f"MFU (datasheet peak): none known for {device.device_kind!r}, so that column "
            "is empty; MFU against the measured peak only"
        )
        + (
            f"; bf16 matmul peak measured in this process ({settings['peak_size']}² "
            f"products): {peak:,.1f} TFLOP/s"
            if peak
            else ""
        ),
        "train: tokens/s counts source + target tokens; `this / ours` is time (> 1: slower "
        "than ours) for train, profile and attention, ours' rate / this rate for generate; MFU "
        "from `training_flops` (3 x forward matmul FLOPs). profile: ms is the device's kernel "
        "time per step, summed over its kernels. attention: ms and XLA temp GiB of one "
        "layer's forward+backward, tokens/s = n / time; the note names the attention path. "
        "fit: ms is the median step after each shape's first (compiling) one.",
        f"Wall time {elapsed:.0f} s (budget {args.budget:.0f} s"
        + (f"; {interrupted}" if interrupted else "")
        + ")"
        + (
            "; DRY RUN on the CPU with tiny shapes: the figures mean nothing"
            if args.dry_run
            else ""
        )
        + f"; host load average {load_average():.1f}",
    ]
    print()
    print(table)
    for text in extra:
        print(text + "\n")
    for note in notes:
        print(note)
    if args.output:
        append_section(
            args.output,
            "GPU run: training MFU, profile, attention memory, compilation"
            + (f" (call {args.call})" if args.call else "")
            + (" (dry run)" if args.dry_run else ""),
            "benchmarks/gpu.py",
            backend,
            found,
            notes,
            table + "".join("\n" + text + "\n" for text in extra),
        )
        print(f"appended to {args.output}")
    return run.rows


if __name__ == "__main__":
    main()
