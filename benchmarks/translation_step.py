"""Training step of the translation example's FULL model, against an older commit and keras-hub.

What it measures: milliseconds per training step (`Model.train_on_batch`: forward, backward,
Adam update, loss and accuracy metric) of the model `examples/translation/train.py` trains by
default (preset "small", shared 8,000-piece vocabulary, pre-norm, dropout 0.2, the paper's
optimizer and label-smoothed loss, precision "auto"), on real Multi30k batches made the way the
example makes them (token-count batches of 4,096, unpadded buckets). The contenders:

* ``ours``: this checkout's `keras_transformer.models.build("translation", ...)`;
* ``ours@REV``: the same call in another checkout (``--baseline DIR``, e.g. a `git worktree` of
  the commit the speed-up is measured against), with weights copied from ``ours``;
* ``keras_hub``: the same model assembled from keras-hub's `TransformerEncoder` /
  `TransformerDecoder` blocks, `ReversibleEmbedding` (tied) and `SinusoidalPositionEncoding`,
  compiled with this checkout's loss, metric and optimizer, so that only the blocks differ.

Every contender runs in its own worker process (two versions of one package cannot share a
process); the workers take turns, ``--steps`` steps each, in a rotating order, for ``--rounds``
rounds, so that a change in the machine's load hits them alike; the median round is reported.
Before timing, ``ours`` and ``ours@REV`` evaluate the same batches with the same weights and then
train on the same batches from there, and the table's last columns give the relative difference of
their losses: the optimisation must not change the numerics beyond rounding.

Run from the repository root::

    git worktree add /tmp/base54 54fff4a
    python benchmarks/translation_step.py --baseline /tmp/base54       # appends to RESULTS.md
    python benchmarks/translation_step.py --quick --output /tmp/x.md   # small, ~1 minute
"""

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# The example's FULL settings that shape a training step, read from its file: importing
# `examples` would put this checkout on the import path of a worker that runs another one.
STEP_SETTINGS = (
    "vocabulary_size",
    "preset",
    "norm_first",
    "dropout",
    "tokens_per_batch",
    "min_tokens_per_batch",
    "warmup_steps",
    "learning_rate_scale",
)
EXAMPLE_FULL = runpy.run_path(os.path.join(ROOT, "examples", "translation", "settings.py"))["FULL"]
FULL = {name: EXAMPLE_FULL[name] for name in STEP_SETTINGS}
QUICK = dict(
    FULL, vocabulary_size=1000, preset="tiny", tokens_per_batch=1024, min_tokens_per_batch=0
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--baseline", default=None, help="checkout of the commit to compare with")
    parser.add_argument("--contenders", default="ours,baseline,keras_hub")
    parser.add_argument("--precision", default="auto", help='dtype policy, or "auto"')
    parser.add_argument("--batches", type=int, default=48, help="distinct real batches")
    parser.add_argument("--steps", type=int, default=12, help="steps per turn")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (median is reported)")
    parser.add_argument("--data-dir", default=None, help="Multi30k folder (default: bundled)")
    parser.add_argument("--quick", action="store_true", help="tiny model and batches")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        help="also profile this many steps of each contender (TensorFlow; needs xprof)",
    )
    parser.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--batches-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("batches", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    names = args.contenders.split(",")
    unknown = set(names) - {"ours", "baseline", "keras_hub"}
    if unknown or not names:
        parser.error(f"--contenders: unknown {sorted(unknown)}; use ours, baseline, keras_hub")
    if "baseline" in names and args.baseline is None:
        names.remove("baseline")
    if args.baseline is not None and not os.path.isdir(
        os.path.join(args.baseline, "keras_transformer")
    ):
        parser.error(f"--baseline {args.baseline!r} is not a checkout of this repository")
    args.contenders = names
    args.settings = QUICK if args.quick else FULL
    return args


# ---------------------------------------------------------------------------------------------
# Worker: one contender in its own process, driven by JSON lines on stdin.


def keras_hub_model(settings, vocabulary_size, precision):
    """The translation model assembled from keras-hub's blocks (pre-norm, tied embeddings)."""
    import keras
    import keras_hub
    from keras import ops

    from keras_transformer.models.presets import PRESETS

    size = PRESETS[settings["preset"]]
    width, dropout = size["hidden_dim"], settings["dropout"]
    embedding = keras_hub.layers.ReversibleEmbedding(
        vocabulary_size, width, tie_weights=True, name="embedding", dtype=precision
    )
    positions = keras_hub.layers.SinePositionEncoding(name="positions", dtype=precision)

    def embed(ids, name):
        x = embedding(ids) * ops.cast(width**0.5, embedding.compute_dtype)
        x = x + positions(x)
        return keras.layers.Dropout(dropout, name=f"{name}_dropout", dtype=precision)(x)

    block = dict(
        intermediate_dim=size["intermediate_dim"],
        num_heads=size["num_heads"],
        dropout=dropout,
        normalize_first=settings["norm_first"],
        dtype=precision,
    )
    source = keras.Input((None,), dtype="int32", name="encoder_token_ids")
    target = keras.Input((None,), dtype="int32", name="decoder_token_ids")
    source_mask, target_mask = ops.not_equal(source, 0), ops.not_equal(target, 0)
    x = embed(source, "source")
    for i in range(size["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(name=f"encoder_{i}", **block)(
            x, padding_mask=source_mask
        )
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="encoder_norm", dtype=precision)(x)
    y = embed(target, "target")
    for i in range(size["num_layers"]):
        y = keras_hub.layers.TransformerDecoder(name=f"decoder_{i}", **block)(
            y, x, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask
        )
    y = keras.layers.LayerNormalization(epsilon=1e-5, name="decoder_norm", dtype=precision)(y)
    logits = ops.cast(embedding(y, reverse=True), "float32")
    return keras.Model({"encoder_token_ids": source, "decoder_token_ids": target}, logits)


def build_worker_model(contender, settings, vocabulary_size, precision):
    import keras

    import keras_transformer as kt

    overrides = dict(
        source_vocabulary_size=vocabulary_size,
        share_embeddings=True,
        warmup_steps=settings["warmup_steps"],
        learning_rate_scale=settings["learning_rate_scale"],
        dropout=settings["dropout"],
        norm_first=settings["norm_first"],
    )
    model = kt.models.build(
        "translation", preset=settings["preset"], precision=precision, **overrides
    )
    if contender != "keras_hub":
        return model
    from keras_transformer.training.metrics import MaskedAccuracy

    hub = keras_hub_model(settings, vocabulary_size, model.build_info["precision"])
    hub.compile(
        optimizer=keras.optimizers.deserialize(keras.optimizers.serialize(model.optimizer)),
        loss=model.loss,
        metrics=[MaskedAccuracy(0)],
        jit_compile=model.build_info["jit_compile"],
    )
    hub.build_info = model.build_info
    keras.utils.set_random_seed(0)
    return hub


def load_batches(path):
    import numpy as np

    with np.load(path) as data:
        count = int(data["count"])
        return [
            (
                {
                    "encoder_token_ids": data[f"source_{i}"],
                    "decoder_token_ids": data[f"decoder_{i}"],
                },
                data[f"labels_{i}"],
            )
            for i in range(count)
        ]


def worker(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    from machine import versions
    from results import git_revision

    import keras_transformer as kt

    batches = load_batches(args.batches_file)
    keras.utils.set_random_seed(0)
    vocabulary_size = int(max(b[0]["encoder_token_ids"].max() for b in batches)) + 1
    vocabulary_size = max(vocabulary_size, args.settings["vocabulary_size"])
    model = build_worker_model(args.worker, args.settings, vocabulary_size, args.precision)
    model.train_on_batch(*batches[0])  # builds the optimizer's variables too
    backend, found = versions()
    # Which checkout this worker runs: its commit, not its folder.
    found["keras_transformer"] = git_revision(os.path.dirname(os.path.dirname(kt.__file__)))
    reply(
        dict(
            ready=True,
            backend=backend,
            versions=found,
            params=model.count_params(),
            precision=model.build_info["precision"],
            jit_compile=model.build_info["jit_compile"],
        )
    )
    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "save_weights":
            model.save_weights(command["path"])
            reply({})
        elif command["do"] == "load_weights":
            model.load_weights(command["path"])
            reply({})
        elif command["do"] == "evaluate":
            losses = [
                float(model.test_on_batch(*batches[i], return_dict=True)["loss"])
                for i in command["batches"]
            ]
            reply(dict(losses=losses))
        elif command["do"] == "train_without_dropout":
            # Dropout masks come from each version's own random stream; without dropout
            # the training steps of two versions must agree to rounding.
            rates = {}
            for layer in sublayers(model):
                if isinstance(layer, keras.layers.Dropout):
                    rates[id(layer)] = (layer, layer.rate)
                    layer.rate = 0.0
            model.make_train_function(force=True)
            losses = [
                float(model.train_on_batch(*batches[i], return_dict=True)["loss"])
                for i in command["batches"]
            ]
            for layer, rate in rates.values():
                layer.rate = rate
            model.make_train_function(force=True)
            reply(dict(losses=losses))
        elif command["do"] == "train":
            wall, cpu = time.perf_counter(), time.process_time()
            losses = []
            for i in command["batches"]:
                losses.append(float(model.train_on_batch(*batches[i], return_dict=True)["loss"]))
            reply(
                dict(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu, losses=losses)
            )
        elif command["do"] == "profile":
            from step_profile import profile

            def run_steps(chosen=command["batches"]):
                for i in chosen:
                    model.train_on_batch(*batches[i])

            totals, idle, rows = profile(run_steps, command["logdir"])
            other = sorted(
                (r for r in rows if categorise_row(r) == "other"),
                key=lambda r: -r["total_self_time"],
            )[:8]
            reply(
                dict(
                    totals=totals,
                    idle=idle,
                    steps=len(command["batches"]),
                    other=[(r["type"], r["operation"], r["total_self_time"]) for r in other],
                )
            )
        elif command["do"] == "exit":
            return


def sublayers(layer, seen=None):
    """Every layer held (in attributes, lists or tuples) under `layer`, once."""
    import keras

    seen = set() if seen is None else seen
    if id(layer) in seen:
        return
    seen.add(id(layer))
    yield layer
    for value in vars(layer).values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, keras.layers.Layer):
                yield from sublayers(item, seen)


def categorise_row(row):
    from step_profile import categorise

    return None if row["type"] == "IDLE" else categorise(row["type"], row["operation"])


def reply(message):
    sys.stdout.write("@@" + json.dumps(message) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# Orchestrator.


def make_batches(args, path):
    """Real Multi30k training batches, as the example makes them, saved for the workers."""
    import numpy as np

    sys.path.insert(0, ROOT)
    from examples.translation.data import load_multi30k
    from keras_transformer.text import SubwordTokenizer, make_translation_dataset

    pairs = load_multi30k("train", data_dir=args.data_dir)
    settings = args.settings
    tokenizer = SubwordTokenizer.train(
        [text for pair in pairs for text in pair], vocabulary_size=settings["vocabulary_size"]
    )
    dataset = make_translation_dataset(
        pairs,
        tokenizer,
        tokens_per_batch=settings["tokens_per_batch"],
        shuffle=True,
        seed=0,
        min_tokens_per_batch=settings["min_tokens_per_batch"],
    )
    arrays, tokens = {}, []
    for i, (inputs, labels) in enumerate(dataset.take(args.batches)):
        arrays[f"source_{i}"] = inputs["encoder_token_ids"].numpy()
        arrays[f"decoder_{i}"] = inputs["decoder_token_ids"].numpy()
        arrays[f"labels_{i}"] = labels.numpy()
        tokens.append(int((arrays[f"source_{i}"] != 0).sum() + (arrays[f"labels_{i}"] != 0).sum()))
    np.savez(path, count=len(tokens), **arrays)
    return tokens, tokenizer.vocabulary_size


class Worker:
    def __init__(self, name, contender, tree, args, batches_file):
        command = [sys.executable, os.path.abspath(__file__), "--worker", contender]
        command += ["--batches-file", batches_file, "--precision", args.precision]
        if args.quick:
            command.append("--quick")
        env = dict(os.environ, PYTHONPATH=tree, TF_CPP_MIN_LOG_LEVEL="2")
        self.name = name
        self.process = subprocess.Popen(
            command, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.info = self.read()

    def read(self):
        for line in self.process.stdout:
            if line.startswith("@@"):
                return json.loads(line[2:])
        raise RuntimeError(f"worker {self.name} exited with {self.process.wait()}")

    def ask(self, **command):
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self):
        self.process.stdin.write(json.dumps({"do": "exit"}) + "\n")
        self.process.stdin.flush()
        self.process.wait()


def relative_difference(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from machine import cpu_description, load_average, load_note
    from results import append_section, git_revision, markdown_table

    started, load_at_start = time.perf_counter(), load_average()
    work = os.path.join("/tmp", f"translation_step_{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    batches_file = os.path.join(work, "batches.npz")
    tokens, vocabulary_size = make_batches(args, batches_file)
    count = len(tokens)
    print(f"{count} batches, {statistics.mean(tokens):,.0f} real tokens each on average")

    trees = {"ours": ROOT, "baseline": args.baseline, "keras_hub": ROOT}
    names = {"ours": "ours", "keras_hub": "keras_hub"}
    if args.baseline:
        names["baseline"] = "ours@" + git_revision(args.baseline)
    workers = {}
    for contender in args.contenders:
        workers[contender] = Worker(
            names[contender], contender, trees[contender], args, batches_file
        )
        print(f"started {names[contender]}: {workers[contender].info}", flush=True)

    # Same weights, same batches: the baseline's losses against ours'.
    numerics = {}
    weights = os.path.join(work, "ours.weights.h5")
    workers["ours"].ask(do="save_weights", path=weights)
    check = list(range(min(4, count)))
    reference = None
    for contender in ("ours", "baseline"):
        if contender in workers:
            if contender != "ours":
                workers[contender].ask(do="load_weights", path=weights)
            evaluated = workers[contender].ask(do="evaluate", batches=check)["losses"]
            trained = workers[contender].ask(do="train_without_dropout", batches=check)["losses"]
            if reference is None:
                reference = (evaluated, trained)
            else:
                numerics[contender] = (
                    relative_difference(evaluated, reference[0]),
                    relative_difference(trained, reference[1]),
                )
    # Warm-up: one pass over every batch shape (tracing).
    for worker_ in workers.values():
        worker_.ask(do="train", batches=list(range(count)))

    times = {c: [] for c in workers}
    cpu_times = {c: [] for c in workers}
    order = list(workers)
    position = 0
    for round_index in range(args.rounds):
        shift = round_index % len(order)
        for contender in order[shift:] + order[:shift]:
            chosen = [(position + i) % count for i in range(args.steps)]
            result = workers[contender].ask(do="train", batches=chosen)
            times[contender].append(result["wall"] / args.steps)
            cpu_times[contender].append(result["cpu"] / args.steps)
        position += args.steps
        print(
            f"round {round_index + 1}: "
            + ", ".join(f"{names[c]} {1000 * times[c][-1]:.0f} ms" for c in order),
            flush=True,
        )
    from paired_ratios import format_spread, paired_ratios

    mean_tokens = statistics.mean(tokens)
    ms = {c: 1000 * statistics.median(times[c]) for c in order}
    cpu_ms = {c: 1000 * statistics.median(cpu_times[c]) for c in order}
    rows = []
    for c in order:
        difference = numerics.get(c)
        rows.append(
            [
                names[c],
                f"{ms[c]:,.0f}",
                format_spread(paired_ratios(times[c], times["ours"]), 3),
                f"{cpu_ms[c]:,.0f}",
                format_spread(paired_ratios(cpu_times[c], cpu_times["ours"]), 3),
                f"{1000 * mean_tokens / ms[c]:,.0f}",
                "—" if difference is None else f"{difference[0]:.1e}",
                "—" if difference is None else f"{difference[1]:.1e}",
            ]
        )
    info = workers["ours"].info
    profiles = {}
    if args.profile:
        chosen = list(range(min(args.profile, count)))
        for contender in order:
            profiles[contender] = workers[contender].ask(
                do="profile", batches=chosen, logdir=os.path.join(work, f"profile_{contender}")
            )
            print(f"{names[contender]}: largest uncategorised ops {profiles[contender]['other']}")
    for worker_ in workers.values():
        worker_.close()
    table = markdown_table(
        [
            "contender",
            "ms / step",
            "this / ours (time)",
            "CPU ms / step",
            "this / ours (CPU)",
            "real tokens/s",
            "loss diff (eval)",
            "loss diff (train)",
        ],
        rows,
    )
    summary = (
        f"Model: the example's {'QUICK-sized' if args.quick else 'FULL'} settings {args.settings}, "
        f"{info['params']:,} parameters, precision {info['precision']}, jit_compile "
        f"{info['jit_compile']}; {count} real Multi30k batches ({mean_tokens:,.0f} non-pad "
        f"source + target tokens on average); {args.steps} steps a turn x {args.rounds} rounds "
        "(median). `this / ours` > 1: the row is slower than ours; it is the median of the "
        "rounds' ratios, with the lowest and highest round in brackets. Loss diff: the largest "
        "relative difference from ours' losses on the same 4 batches, same weights (evaluation, "
        "then training steps with dropout off: the versions draw different dropout masks)."
    )
    load = load_note(load_at_start)
    if profiles:
        from step_profile import PROFILE_HEADER, profile_rows

        for contender, found in profiles.items():
            rows = profile_rows(found["totals"], found["idle"], found["steps"])
            table += (
                f"\nProfile of {names[contender]}, {found['steps']} steps "
                "(`benchmarks/step_profile.py`: op self times by purpose):\n\n"
                + markdown_table(PROFILE_HEADER, rows)
            )
    elapsed = time.perf_counter() - started
    print()
    print(table)
    print(summary)
    if args.output:
        append_section(
            args.output,
            "Translation training step (FULL model)",
            "benchmarks/translation_step.py",
            info["backend"],
            info["versions"],
            [f"CPU: {cpu_description()}", summary, f"Wall time: {elapsed:.0f} s; {load}"],
            table,
        )
        print(f"appended to {args.output}")


if __name__ == "__main__":
    main()
