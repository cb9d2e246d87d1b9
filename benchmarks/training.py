"""Training-step throughput of our Transformer encoder against keras-hub's and Keras core's.

What it measures: tokens per second of full training steps (forward, backward and an
Adam update, `Model.train_on_batch`) of three encoder stacks of the same shape and the
same semantics (post-norm, ReLU feed-forward, dropout 0.1 on the residual branches and
on the attention probabilities):

* ``ours``: `keras_transformer.layers.TransformerEncoder`;
* ``keras_hub``: a stack of `keras_hub.layers.TransformerEncoder` blocks;
* ``keras_core``: a stack of hand-built blocks around `keras.layers.MultiHeadAttention`.

Everything outside the encoder is shared: a `keras.layers.Embedding` plus our
`SinusoidalPositionEncoding` in front, and a per-token `Dense` classifier with sparse
categorical cross-entropy (logits in float32) behind. Inputs are synthetic random token ids
(no padding, so no masks). Each precision (``float32``, ``mixed_bfloat16``) and each
``jit_compile`` setting is a separate compiled model. After warm-up steps (which include
tracing and compilation), every round times ``--steps`` steps of each model, the contenders
taking turns step by step in a rotating order (so that changes in the machine's load hit them
alike); the reported figure is the median over the rounds. Tokens per CPU-second (the
process's CPU time) are reported too, as a check that is less sensitive to other load.

FLOPs per token are estimated as ``6 * P + 12 * L * T * d``: ``P`` counts the weights used in
matrix multiplications (all encoder and classifier kernels and biases, not the embedding
table), ``6 * P`` is forward plus backward, and ``12 * L * T * d`` is the two attention
matrix products (``Q Kᵀ`` and ``A V``, ``2 * T * d`` FLOPs each per token and layer,
tripled for training) over ``L`` layers of width ``d`` and sequence length ``T``. The
percentage of peak compares that with the matmul peak measured in the same process
(`benchmarks/machine.py`, a 2048 x 2048 product in the precision's compute dtype) before the
models are built, or with ``--peak-gflops``.

Run from the repository root (the backend is chosen by ``KERAS_BACKEND``, or ``--backend``)::

    python benchmarks/training.py                       # full run, appends to RESULTS.md
    python benchmarks/training.py --quick --output /tmp/x.md   # tiny shapes, no XLA, ~30 s
    KERAS_BACKEND=jax python benchmarks/training.py --jit on   # JAX without jit is eager
"""

import statistics
import time

from command_line import new_parser, parse_shared, report, set_backend

CONTENDERS = ("ours", "keras_hub", "keras_core")
PRECISIONS = ("float32", "mixed_bfloat16")
# The matmul dtype whose peak a precision's training is measured against.
PEAK_DTYPE = {"float32": "float32", "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}

FULL_SHAPE = dict(vocab=8000, hidden=256, heads=4, ff=1024, layers=4, seq=128, batch=32, classes=32)
QUICK_SHAPE = dict(vocab=100, hidden=32, heads=2, ff=64, layers=1, seq=16, batch=4, classes=8)


def parse_args(argv=None):
    parser = new_parser(
        __doc__,
        CONTENDERS,
        jit_help="jit_compile setting(s) to measure (default: both; off with --quick)",
    )
    parser.add_argument("--steps", type=int, default=None, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per model")
    parser.add_argument(
        "--precisions", default=",".join(PRECISIONS), help="comma-separated dtype policies"
    )
    parser.add_argument(
        "--peak-gflops",
        default=None,
        help="matmul peaks per precision, e.g. float32=456,mixed_bfloat16=804 (default: "
        "measured in this process, the only figure a fraction of peak can be taken against: "
        "the same machine type measured 211 and 456 GFLOP/s float32 on two days)",
    )
    counts = {"steps": (10, 2), "rounds": (3, 1), "warmup": (3, 1)}
    args = parse_shared(parser, argv, CONTENDERS, FULL_SHAPE, QUICK_SHAPE, counts)
    args.precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if args.jit is None:
        args.jit = "off" if args.quick else "both"
    args.jit_modes = {"both": [False, True], "on": [True], "off": [False]}[args.jit]
    args.peaks = {}
    for item in (args.peak_gflops or "").split(","):
        if item.strip():
            name, value = item.split("=")
            args.peaks[name.strip()] = float(value)
    return args


def build_model(contender, precision, jit_compile, shape):
    """The shared embedding front and classifier head around one contender's encoder."""
    import keras

    from keras_transformer.layers import SinusoidalPositionEncoding, TransformerEncoder

    common = dict(dtype=precision)
    token_ids = keras.Input((shape["seq"],), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(shape["vocab"], shape["hidden"], name="embedding", **common)(
        token_ids
    )
    x = keras.layers.Add(name="add_positions", **common)(
        [x, SinusoidalPositionEncoding(name="positions", **common)(x)]
    )
    x = keras.layers.Dropout(0.1, name="embedding_dropout", **common)(x)
    if contender == "ours":
        x = TransformerEncoder(
            num_layers=shape["layers"],
            num_heads=shape["heads"],
            intermediate_dim=shape["ff"],
            dropout=0.1,
            attention_dropout=0.1,
            norm_first=False,
            layer_norm_epsilon=1e-5,
            name="encoder",
            **common,
        )(x)
    else:
        import keras_hub

        for i in range(shape["layers"]):
            if contender == "keras_hub":
                block = keras_hub.layers.TransformerEncoder(
                    shape["ff"], shape["heads"], dropout=0.1, name=f"block_{i}", **common
                )
            else:
                block = core_encoder_block(shape, name=f"block_{i}", **common)
            x = block(x)
    logits = keras.layers.Dense(shape["classes"], dtype="float32", name="classifier")(x)
    model = keras.Model(token_ids, logits, name=contender)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def core_encoder_block(shape, name, dtype):
    """A post-norm encoder block written with Keras core layers only (functional)."""
    import keras

    width = shape["hidden"]
    inputs = keras.Input((shape["seq"], width), dtype=keras.DTypePolicy(dtype).compute_dtype)

    def layer(cls, *args, suffix, **kwargs):
        return cls(*args, dtype=dtype, name=f"{name}_{suffix}", **kwargs)

    attended = layer(
        keras.layers.MultiHeadAttention,
        num_heads=shape["heads"],
        key_dim=width // shape["heads"],
        dropout=0.1,
        suffix="self_attention",
    )(inputs, inputs)
    attended = layer(keras.layers.Dropout, 0.1, suffix="attention_dropout")(attended)
    x = layer(keras.layers.Add, suffix="attention_residual")([inputs, attended])
    x = layer(keras.layers.LayerNormalization, epsilon=1e-5, suffix="attention_norm")(x)
    h = layer(keras.layers.Dense, shape["ff"], activation="relu", suffix="ff_inner")(x)
    h = layer(keras.layers.Dense, width, suffix="ff_outer")(h)
    h = layer(keras.layers.Dropout, 0.1, suffix="ff_dropout")(h)
    x = layer(keras.layers.Add, suffix="ff_residual")([x, h])
    x = layer(keras.layers.LayerNormalization, epsilon=1e-5, suffix="ff_norm")(x)
    return keras.Model(inputs, x, name=name)


def matmul_params(model):
    """Weights that take part in matrix multiplications: everything but the embedding table."""
    total = 0
    for weight in model.trainable_weights:
        if weight.name in ("embeddings", "gamma", "beta"):  # lookups and layer norms
            continue
        total += int(_size(weight.shape))
    return total


def _size(shape):
    size = 1
    for dim in shape:
        size *= dim
    return size


def flops_per_token(params, shape):
    return 6 * params + 12 * shape["layers"] * shape["seq"] * shape["hidden"]


def synthetic_batches(shape, count=4, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    size = (shape["batch"], shape["seq"])
    return [
        (
            rng.integers(1, shape["vocab"], size=size, dtype="int32"),
            rng.integers(0, shape["classes"], size=size, dtype="int32"),
        )
        for _ in range(count)
    ]


def run_steps(model, batches, steps):
    """Runs `steps` training steps; returns (wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for step in range(steps):
        x, y = batches[step % len(batches)]
        model.train_on_batch(x, y)  # returns numpy logs, which waits for the step
    return time.perf_counter() - wall, time.process_time() - cpu


def markdown_table(rows):
    from paired_ratios import format_spread

    header = (
        "| precision | jit_compile | contender | tokens/s | ours / this "
        "| tokens/CPU-s | ours / this (CPU) | % of peak |\n"
        "|---|---|---|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for row in rows:
        ours = row["contender"] == "ours"
        peak = "—" if row["peak_pct"] is None else f"{row['peak_pct']:.1f}"
        lines.append(
            f"| {row['precision']} | {'on' if row['jit'] else 'off'} | {row['contender']} "
            f"| {row['tokens_per_s']:,.0f} | {'—' if ours else format_spread(row['ratio'], 3)} "
            f"| {row['tokens_per_cpu_s']:,.0f} "
            f"| {'—' if ours else format_spread(row['cpu_ratio'], 3)} | {peak} |"
        )
    return header + "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    set_backend(args)
    from machine import load_average, matmul_peak_gflops, versions

    started, load_at_start = time.perf_counter(), load_average()

    import keras

    backend, found = versions()
    shape = args.shape
    tokens = shape["batch"] * shape["seq"]
    print(f"backend {backend}; " + ", ".join(f"{k} {v}" for k, v in found.items()))
    print(f"shape {shape}; {args.steps} steps x {args.rounds} rounds, {args.warmup} warm-up")

    for precision in args.precisions:
        if precision not in args.peaks and precision in PEAK_DTYPE:
            args.peaks[precision] = round(matmul_peak_gflops(PEAK_DTYPE[precision]), 1)
    print(f"matmul peaks (GFLOP/s): {args.peaks}")
    batches = synthetic_batches(shape)
    configs = [(p, j) for p in args.precisions for j in args.jit_modes]
    models, params = {}, {}
    # Seeded once: changing TensorFlow's global seed later retraces every tf.function.
    keras.utils.set_random_seed(0)
    for precision, jit in configs:
        for contender in args.contenders:
            model = build_model(contender, precision, jit, shape)
            t0 = time.perf_counter()
            run_steps(model, batches, args.warmup)
            key = (precision, jit, contender)
            models[key] = model
            params[key] = matmul_params(model)
            print(
                f"built {precision:>15} jit={'on ' if jit else 'off'} {contender:<10} "
                f"{model.count_params():,} params, warm-up {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
    if len(set(params.values())) > 1:
        print(f"WARNING: contenders differ in matmul parameters: {params}")

    walls, cpus = {key: [] for key in models}, {key: [] for key in models}
    for round_index in range(args.rounds):
        for precision, jit in configs:
            # The contenders take turns step by step (in a rotating order), so that a change
            # in the machine's load hits them alike; each measurement sums `steps` steps.
            spent = {c: [0.0, 0.0] for c in args.contenders}
            for step in range(args.steps):
                shift = (round_index + step) % len(args.contenders)
                for contender in args.contenders[shift:] + args.contenders[:shift]:
                    batch = batches[step % len(batches) : step % len(batches) + 1]
                    wall, cpu = run_steps(models[(precision, jit, contender)], batch, 1)
                    spent[contender][0] += wall
                    spent[contender][1] += cpu
            for contender, (wall, cpu) in spent.items():
                walls[(precision, jit, contender)].append(tokens * args.steps / wall)
                cpus[(precision, jit, contender)].append(tokens * args.steps / cpu)
        done = ", ".join(f"{k[2]}/{k[0]}/{int(k[1])}={v[-1]:,.0f}" for k, v in walls.items())
        print(f"round {round_index + 1} tokens/s: {done}", flush=True)

    from paired_ratios import paired_ratios

    rows = []
    for precision, jit in configs:
        wall = {c: statistics.median(walls[(precision, jit, c)]) for c in args.contenders}
        cpu = {c: statistics.median(cpus[(precision, jit, c)]) for c in args.contenders}
        for contender in args.contenders:
            peak = args.peaks.get(precision)
            flops = flops_per_token(params[(precision, jit, contender)], shape)
            rows.append(
                dict(
                    precision=precision,
                    jit=jit,
                    contender=contender,
                    tokens_per_s=wall[contender],
                    ratio=paired_ratios(
                        walls.get((precision, jit, "ours")), walls[(precision, jit, contender)]
                    ),
                    tokens_per_cpu_s=cpu[contender],
                    cpu_ratio=paired_ratios(
                        cpus.get((precision, jit, "ours")), cpus[(precision, jit, contender)]
                    ),
                    peak_pct=None if peak is None else 100 * wall[contender] * flops / peak / 1e9,
                )
            )
    table = markdown_table(rows)
    some_params = next(iter(params.values()))
    summary = (
        f"Shape: {shape}; {args.steps} timed steps x {args.rounds} rounds (median), "
        f"{args.warmup} warm-up steps. FLOPs/token = 6*P + 12*L*T*d = "
        f"{flops_per_token(some_params, shape) / 1e6:.2f} M (P = {some_params:,} matmul "
        f"weights); matmul peaks (GFLOP/s, measured in this process unless given): "
        f"{args.peaks}. `ours / this` is ours' tokens/s over "
        "the row's (> 1: ours is faster), the median of the rounds' ratios with the lowest "
        "and highest round in brackets; tokens/CPU-s divides by the process's CPU time, "
        "which is less sensitive to other load on the machine."
    )
    report(
        args,
        "Training throughput",
        "benchmarks/training.py",
        (backend, found),
        table,
        summary,
        started,
        load_at_start,
        remark=" (other processes lower the absolute figures)",
    )


if __name__ == "__main__":
    main()
