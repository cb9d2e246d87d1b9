"""One prepared GPU run (NVIDIA H200, JAX backend): training MFU, attention memory, generation.

What it measures, in one process and one table, inside a time budget (``--budget`` seconds,
default 210: the run must finish in under 5 minutes; a part the budget leaves out is a row
that says so, to be run again with ``--parts``; an interrupt, as ``run_gpu.sh``'s ``timeout``
sends, ends the run with the table of what was measured):

* ``train``: tokens per second (source + target tokens) and model FLOP utilisation of
  `Model.train_on_batch` (forward, backward, Adam update, label-smoothed loss, accuracy) for the
  paper's ``base`` and ``big`` translation shapes, built by
  ``keras_transformer.models.build("translation", preset=..., precision="mixed_bfloat16",
  jit_compile=True)`` (pre-norm, shared 37,000-token vocabulary, the preset's dropout), against
  the same model assembled from keras-hub's blocks (`benchmarks/translation_step.keras_hub_model`,
  compiled with our loss, metric and optimizer, so that only the blocks differ). Synthetic
  batches of ``--batch`` x ``--length`` source and as many target tokens (default 64 x 256:
  16,384 + 16,384), no padding. MFU = model FLOPs per step (`training_flops`: 3 x the forward
  matmul FLOPs, attention's QKᵀ and AV counted in full, the output projection included) / step
  time / peak, against two peaks: the H200's dense bf16 datasheet figure (989 TFLOP/s) and the
  bf16 matmul peak measured in this process (`machine.matmul_peak_gflops`, 8192 x 8192).
  Attention kernel: ours calls `keras.ops.dot_product_attention` with ``flash_attention=None``,
  which on an Ampere-or-later GPU picks JAX's cuDNN fused (flash) attention; keras-hub's blocks
  put dropout on the attention probabilities, and Keras' `MultiHeadAttention` then takes its
  explicit path (with flash attention forced on it refuses dropout), so they run O(n²) attention.
* ``attention``: one attention layer's forward+backward (`benchmarks/attention.py`'s `measure`)
  at 8,192, 16,384 and 32,768 tokens, width 512, 8 heads, bfloat16: milliseconds and XLA's
  temporary bytes for the compiled step (exact), with the path read from the compiled program
  (``cuDNN fused`` or the einsum-softmax). A step whose temporaries would not fit is compiled
  but not run.
* ``generate``: cached greedy decoding tokens per second at batch 1 and 64 (the base shape,
  float32 weights, 32 source tokens, 64 new tokens), ours against keras-hub's caches and
  `GreedySampler` (`benchmarks/generation.py`'s `make_runners`).
* ``fit`` (first, as it is the cheapest and says whether XLA compiles a handful of times): a
  short real training run, `Model.fit` of the ``base`` translation model over
  ``fit_steps`` batches of varied sentence lengths in the fixed shapes of
  `make_translation_dataset(fixed_shapes=True)` (`fit_batch_shapes`: 8,192 tokens a side in
  batches padded to 16, 24, 32, 48 or 64 tokens; the ids are random, since the GPU machine
  has no TensorFlow to tokenize text). Reported apart: the compilations of the train step
  and the seconds XLA spent on them (`jax.monitoring`), the first step of each shape, and
  the median later step, whose real (unpadded) tokens give the tokens per second.

``--dry-run`` runs the same code end to end on the CPU with tiny shapes (under a minute; the
test suite runs it), with flash attention and the GPU peak left out.

Run it on the GPU machine (Keras and keras-hub travel as wheels: see `benchmarks/run_gpu.sh`,
which holds the download, install and run commands)::

    bash benchmarks/run_gpu.sh                          # on the H200, appends to $OUT/RESULTS.md
    KERAS_BACKEND=jax python benchmarks/gpu.py --dry-run --output ''   # CPU check, < 60 s
"""

import argparse
import gc
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

H200_BF16_DENSE_TFLOPS = 989.0
VOCABULARY = 37000  # the paper's shared English-German vocabulary
HEADER = [
    "part",
    "shape",
    "contender",
    "tokens/s",
    "this / ours",
    "ms",
    "MFU (989 TFLOP/s)",
    "MFU (measured peak)",
    "memory GiB",
    "note",
]
FULL = dict(
    presets=("big", "base"),  # big first: the MFU target is on it
    vocabulary=VOCABULARY,
    batch=64,
    length=256,
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
)
DRY_RUN = dict(
    FULL,
    presets=("tiny",),
    vocabulary=64,
    batch=2,
    length=8,
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
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU, < 60 s")
    parser.add_argument("--budget", type=float, default=210.0, help="seconds for all parts")
    parser.add_argument("--parts", default="fit,train,attention,generate")
    parser.add_argument("--batch", type=int, default=None, help="training sequences per batch")
    parser.add_argument("--length", type=int, default=None, help="training sequence length")
    parser.add_argument("--steps", type=int, default=None, help="timed training steps")
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "RESULTS.md"),
        help="Markdown file to append the table to ('' to skip)",
    )
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(args.parts) - {"train", "attention", "generate", "fit"})
    if unknown or not args.parts:
        parser.error(f"--parts: unknown {unknown}; choose from fit,train,attention,generate")
    args.settings = dict(DRY_RUN if args.dry_run else FULL)
    for name in ("batch", "length", "steps"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                parser.error(f"--{name} must be at least 1")
            args.settings[name] = value
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


def synthetic_batch(settings, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (settings["batch"], settings["length"])
    ids = lambda: rng.integers(3, settings["vocabulary"], shape).astype("int32")  # noqa: E731
    return {"encoder_token_ids": ids(), "decoder_token_ids": ids()}, ids()


def measure_training(preset, contender, settings, peak_tflops):
    from keras_transformer.models.presets import PRESETS

    model = build_translation(contender, preset, settings)
    inputs, labels = synthetic_batch(settings)
    start = time.perf_counter()
    model.train_on_batch(inputs, labels)  # compiles
    compile_s = time.perf_counter() - start
    model.train_on_batch(inputs, labels)
    times = []
    for _ in range(settings["steps"]):
        start = time.perf_counter()
        model.train_on_batch(inputs, labels)  # returns floats: waits for the step
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    batch, length = settings["batch"], settings["length"]
    flops = training_flops(PRESETS[preset], settings["vocabulary"], batch, length, length)
    params = model.count_params()
    del model
    free_memory()
    return dict(
        seconds=seconds,
        tokens=2 * batch * length / seconds,
        mfu=flops / seconds / (H200_BF16_DENSE_TFLOPS * 1e12),
        mfu_measured=flops / seconds / (peak_tflops * 1e12) if peak_tflops else None,
        note=f"{params / 1e6:.1f}M params, {flops / 1e12:.2f} TFLOP/step, "
        f"compile {compile_s:.0f} s",
    )


def training_rows(settings, budget, peak_tflops, rows):
    shape_of = lambda p: f"{p}, {settings['batch']}x{settings['length']}"  # noqa: E731
    for preset in settings["presets"]:
        ours = None
        for contender in ("ours", "keras_hub"):
            if budget.left() < 20:
                rows.append(row("train", shape_of(preset), contender, note="skipped: budget"))
                continue
            try:
                found = measure_training(preset, contender, settings, peak_tflops)
            except Exception as error:
                free_memory()
                rows.append(row("train", shape_of(preset), contender, note=failure(error)))
                continue
            ours = found if contender == "ours" else ours
            rows.append(
                row(
                    "train",
                    shape_of(preset),
                    contender,
                    tokens=found["tokens"],
                    ratio=found["seconds"] / ours["seconds"] if ours else None,
                    ms=1000 * found["seconds"],
                    mfu=found["mfu"],
                    mfu_measured=found["mfu_measured"],
                    note=found["note"],
                )
            )
            print(f"train {preset} {contender}: {rows[-1]}", flush=True)


# ---------------------------------------------------------------------------------------------
# Attention memory at long sequences.


def attention_rows(settings, budget, rows):
    from attention import measure

    config = settings["attention"]
    for length in settings["attention_lengths"]:
        ours_ms = None
        for contender in settings["attention_contenders"]:
            shape = f"n={length}, {config['heads']} heads, width {config['width']}"
            if budget.left() < 10:
                rows.append(row("attention", shape, contender, note="skipped: budget"))
                continue
            # Temporaries over ~100 GiB would not fit beside what is allocated: compile only.
            found = measure(contender, length, config, rss=False, run_limit_bytes=100 * 2**30)
            free_memory()
            if "error" in found:
                rows.append(row("attention", shape, contender, note=found["error"]))
                continue
            if contender == "ours":
                ours_ms = found.get("ms")
            memory = found.get("xla_temp_mib")
            rows.append(
                row(
                    "attention",
                    shape,
                    contender,
                    tokens=length * config["batch"] / found["ms"] * 1000 if "ms" in found else None,
                    ratio=found["ms"] / ours_ms if ours_ms and "ms" in found else None,
                    ms=found.get("ms"),
                    memory=memory / 1024 if memory is not None else None,
                    note=found["path"] + ("" if "ms" in found else "; not run (memory)"),
                )
            )
            print(f"attention {shape} {contender}: {rows[-1]}", flush=True)


# ---------------------------------------------------------------------------------------------
# Cached greedy generation.


def generation_rows(settings, budget, rows):
    from generation import make_runners

    for batch in settings["generation_batches"]:
        shape = dict(settings["generation"], batch=batch, new_tokens=settings["new_tokens"])
        label = f"base, batch {batch}, {settings['new_tokens']} new"
        if budget.left() < 20:
            for contender in ("ours", "keras_hub"):
                rows.append(row("generate", label, contender, note="skipped: budget"))
            continue
        try:
            runners = make_runners(shape, True, ["ours_greedy", "keras_hub_greedy"])
        except Exception as error:
            rows.append(row("generate", label, "ours", note=failure(error)))
            continue
        ours_rate = None
        for name, contender in (("ours_greedy", "ours"), ("keras_hub_greedy", "keras_hub")):
            run, rows_per_call = runners[name]
            try:
                run(warm_up=True)
                steps, start = 0, time.perf_counter()
                for _ in range(settings["calls"]):
                    steps += run()
                seconds = time.perf_counter() - start
            except Exception as error:
                rows.append(row("generate", label, contender, note=failure(error)))
                continue
            rate = rows_per_call * steps / seconds
            ours_rate = rate if contender == "ours" else ours_rate
            rows.append(
                row(
                    "generate",
                    label,
                    contender,
                    tokens=rate,
                    ratio=ours_rate / rate if ours_rate else None,
                    ms=1000 * seconds / settings["calls"],
                    note="greedy, cached, float32 weights",
                )
            )
            print(f"generate {label} {contender}: {rows[-1]}", flush=True)
        del runners
        free_memory()


# ---------------------------------------------------------------------------------------------
# A short training run over the fixed shapes: compilation and step time apart.


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


def fit_rows(settings, budget, rows):
    import keras

    import keras_transformer as kt
    from examples.compilations import CompilationCounter

    config = settings["fit"]
    shapes = fit_batch_shapes(config["tokens_per_batch"], config["max_length"])
    label = (
        f"{config['preset']}, {config['tokens_per_batch']} tokens, {len(shapes)} shapes, "
        f"{config['steps']} steps"
    )
    if budget.left() < 60:
        rows.append(row("fit", label, "ours", note="skipped: budget"))
        return
    batches, real_tokens = fit_batches(shapes, config["steps"], settings["vocabulary"])

    class StepTimes(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])  # waits for the step
            times.append(time.perf_counter() - self.started)

    times, counter = [], CompilationCounter()
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
    except Exception as error:
        free_memory()
        rows.append(row("fit", label, "ours", note=failure(error)))
        return
    del model
    free_memory()
    first, later = times[: len(shapes)], times[len(shapes) :]
    step = statistics.median(later or first)
    real = real_tokens[len(shapes) :]
    tokens = statistics.median(t / s for t, s in zip(real, later)) if later else None
    compiled, compile_seconds = counter.epochs[0]["train"], counter.epochs[0]["train_seconds"]
    rows.append(
        row(
            "fit",
            label,
            "ours",
            tokens=tokens,
            ms=1000 * step,
            note=f"{compiled} compilations of the train step ({compile_seconds:.1f} s of XLA); "
            f"first step of each shape {sum(first):.1f} s in all; whole fit {seconds:.1f} s; "
            "tokens/s: unpadded source + target tokens of the later steps",
        )
    )
    print(f"fit {label}: {rows[-1]}", flush=True)


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


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.perf_counter()
    budget = Budget(args.budget)
    import jax
    import keras
    from machine import cpu_description, load_average, matmul_peak_gflops, versions
    from results import append_section, markdown_table

    if keras.backend.backend() != "jax":
        raise SystemExit(
            f"benchmarks/gpu.py runs on JAX; KERAS_BACKEND is {keras.backend.backend()}"
        )
    device = jax.devices()[0]
    on_gpu = device.platform == "gpu"
    if not on_gpu and not args.dry_run:
        raise SystemExit(f"no GPU ({device}); use --dry-run to check the script on a CPU")
    settings = args.settings
    peak = matmul_peak_gflops("bfloat16", settings["peak_size"], settings["peak_seconds"]) / 1000
    print(f"device {device.device_kind}; bf16 matmul peak {peak:,.1f} TFLOP/s", flush=True)
    rows, interrupted = [], None
    parts = dict(
        train=lambda: training_rows(settings, budget, peak, rows),
        attention=lambda: attention_rows(settings, budget, rows),
        generate=lambda: generation_rows(settings, budget, rows),
        fit=lambda: fit_rows(settings, budget, rows),
    )
    try:
        for part in args.parts:
            parts[part]()
    except KeyboardInterrupt:  # `timeout -s INT` in run_gpu.sh: keep what was measured
        interrupted = f"interrupted after {time.perf_counter() - started:.0f} s"
        rows.append(row(part, "—", "—", note=interrupted))
    table = markdown_table(HEADER, format_rows(rows))
    backend, found = versions()
    elapsed = time.perf_counter() - started
    notes = [
        f"Device: {device.device_kind} ({device.platform}); host CPU: {cpu_description()}",
        f"bf16 matmul peak measured in this process ({settings['peak_size']}² products): "
        f"{peak:,.1f} TFLOP/s; datasheet dense bf16 {H200_BF16_DENSE_TFLOPS:.0f} TFLOP/s",
        "train: tokens/s counts source + target tokens; `this / ours` is time (> 1: slower "
        "than ours) for train and attention, ours' rate / this rate for generate; MFU from "
        "`training_flops` (3 x forward matmul FLOPs). attention: ms and XLA temp GiB of one "
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
    for note in notes:
        print(note)
    if args.output:
        append_section(
            args.output,
            "GPU run: training MFU, attention memory, generation"
            + (" (dry run)" if args.dry_run else ""),
            "benchmarks/gpu.py",
            backend,
            found,
            notes,
            table,
        )
        print(f"appended to {args.output}")
    return rows


if __name__ == "__main__":
    main()
