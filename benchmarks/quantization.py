"""Quantised translation models: size, CPU decoding speed and BLEU; LoRA against full fine-tuning.

Takes the run folder of a trained translation model (what `python -m
examples.translation.train` writes: `RUN/model` is its `save_pretrained` bundle) and, for
each precision:

* ``float32``: the trained weights under the float32 policy;
* ``bfloat16``: the same weights under ``dtype="mixed_bfloat16"`` (computing in bfloat16,
  softmax, layer norms and positions in float32; the weights stay float32, so its file is
  the float32 one: a pure-bfloat16 policy is not one the layers support);
* ``int8`` / ``int4`` / ``float8``: the float32 model after ``model.quantize(mode)``
  (Keras's own quantisation of every ``Dense`` / ``EinsumDense`` and, for int8 / int4,
  the token embeddings; float8 leaves embeddings float32),

reports:

* ``weights MB``: the size of ``model.weights.h5`` written by `save_pretrained`, and its
  fraction of the float32 file;
* ``greedy tok/s`` and ``beam-4 tok/s``: output subword tokens per second (end token
  included) translating the first ``--speed-sentences`` test sentences with the
  example's own `translate` (batches of 64, sorted by length), after one untimed pass
  that compiles; the median of ``--rounds`` timed passes;
* ``BLEU``: sacreBLEU (cased, 13a) on test_2016_flickr (``--eval-pairs`` sentences) with
  the example's beam search (beam 4, GNMT length penalty 0.6), as the example scores it.

``--lora`` adds a section: train steps of the float32 model on a batch of training pairs
with every weight trainable (Adam) against ``enable_lora(rank)`` (only the adapters train),
step time (median of timed steps after compiled warm-up steps), trainable parameters and
optimizer-state size (Adam's two moments per trainable weight: the memory LoRA saves,
besides gradients). Device memory is not measured on CPU.

Run from the repository root::

    python benchmarks/quantization.py --run-dir runs/multi30k --lora
    python benchmarks/quantization.py --run-dir runs/multi30k-quick --eval-pairs 200 \\
        --speed-sentences 64 --lora --label "quick model"
"""

import argparse
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from results import markdown_table

MODES = ("float32", "bfloat16", "int8", "int4", "float8")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a translation run folder (RUN/model)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}")
    parser.add_argument("--eval-pairs", type=int, default=None, help="test sentences scored")
    parser.add_argument("--speed-sentences", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument("--lora", action="store_true", help="also LoRA vs full fine-tuning")
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--lora-batch", type=int, default=64, help="sentence pairs per step")
    parser.add_argument("--lora-steps", type=int, default=10, help="timed steps")
    parser.add_argument("--label", default="", help="what model this is, for the title")
    parser.add_argument(
        "--output",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md"),
        help="Markdown file to append to; '' to only print",
    )
    args = parser.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(args.modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from {MODES}")
    if not os.path.isfile(os.path.join(args.run_dir, "model", "config.json")):
        parser.error(f"--run-dir: no model/config.json under '{args.run_dir}' (a training run?)")
    return args


def git_revision():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=here
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=here,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return commit + (" (with uncommitted changes in the tree)" if dirty else "")


def versions():
    import keras

    found = {"keras": keras.__version__, "python": platform.python_version()}
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        found["tensorflow"] = tf.__version__
    elif backend == "jax":
        import jax

        found["jax"] = jax.__version__
    elif backend == "torch":
        import torch

        found["torch"] = torch.__version__
    return backend, found


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_model(run_dir, mode):
    """The run's model in `mode`, and its tokenizer."""
    from keras_transformer.saving import load_pretrained

    bundle = load_pretrained(os.path.join(run_dir, "model"))
    # A fresh, uncompiled copy in an explicit policy: the saved model may be compiled
    # (its weights file then holds Adam's state too) and in mixed precision (the example's
    # `--precision auto` picks mixed_bfloat16 on a CPU with bfloat16 instructions).
    policy = "mixed_bfloat16" if mode == "bfloat16" else "float32"
    model = type(bundle.model).from_config(dict(bundle.model.get_config(), dtype=policy))
    model.set_weights(bundle.model.get_weights())
    if mode not in ("float32", "bfloat16"):
        model.quantize(mode)
    return model, bundle.tokenizer


def weights_size(model):
    from keras_transformer.saving import save_pretrained

    with tempfile.TemporaryDirectory() as directory:
        save_pretrained(model, os.path.join(directory, "model"))
        return os.path.getsize(os.path.join(directory, "model", "model.weights.h5"))


def output_tokens(tokenizer, texts):
    # The end token counts as generated too.
    return sum(len(ids) + 1 for ids in tokenizer.tokenize(texts).to_list())


def decode_speed(model, tokenizer, sentences, beam_size, length_penalty, rounds):
    from examples.translation.translator import translate

    kwargs = dict(beam_size=beam_size, length_penalty=length_penalty)
    hypotheses = translate(model, tokenizer, sentences, **kwargs)  # compiles
    tokens = output_tokens(tokenizer, hypotheses)
    rates = []
    for _ in range(rounds):
        started = time.perf_counter()
        translate(model, tokenizer, sentences, **kwargs)
        rates.append(tokens / (time.perf_counter() - started))
    return statistics.median(rates)


def measure_mode(args, mode, test_pairs):
    from examples.translation.train import bleu
    from examples.translation.translator import translate

    model, tokenizer = load_model(args.run_dir, mode)
    size = weights_size(model)
    speed_sources = [source for source, _ in test_pairs[: args.speed_sentences]]
    greedy = decode_speed(model, tokenizer, speed_sources, 1, 0.0, args.rounds)
    beam = decode_speed(
        model, tokenizer, speed_sources, args.beam_size, args.length_penalty, args.rounds
    )
    hypotheses = translate(
        model,
        tokenizer,
        [source for source, _ in test_pairs],
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
    )
    score = bleu(hypotheses, [target for _, target in test_pairs])
    return dict(mode=mode, size=size, greedy=greedy, beam=beam, **score)


def quantization_table(rows):
    base = next((r for r in rows if r["mode"] == "float32"), rows[0])
    header = (
        "precision",
        "weights MB",
        "of float32",
        "greedy tok/s",
        "beam-4 tok/s",
        "BLEU",
        "BLEU lowercased",
    )
    cells = [
        (
            row["mode"],
            f"{row['size'] / 1e6:.1f}",
            f"{row['size'] / base['size']:.0%}",
            f"{row['greedy']:,.0f}",
            f"{row['beam']:,.0f}",
            f"{row['bleu']:.2f}",
            f"{row['bleu_lowercase']:.2f}",
        )
        for row in rows
    ]
    return markdown_table(header, cells)


def lora_measurement(args, train_pairs):
    """Step time, trainable parameters and Adam state: full fine-tuning against LoRA."""
    import keras
    import numpy as np

    from keras_transformer.training import LabelSmoothedCrossEntropy

    rows = []
    for name in ("full fine-tuning", f"LoRA rank {args.lora_rank}"):
        model, tokenizer = load_model(args.run_dir, "float32")
        if name.startswith("LoRA"):
            model.enable_lora(args.lora_rank)
        sources = tokenizer.tokenize([s for s, _ in train_pairs]).to_list()
        targets = tokenizer.tokenize([t for _, t in train_pairs]).to_list()
        width = max(len(ids) for ids in sources) + 1
        target_width = max(len(ids) for ids in targets) + 1
        encoder = np.zeros((args.lora_batch, width), "int32")
        decoder = np.zeros((args.lora_batch, target_width), "int32")
        labels = np.zeros((args.lora_batch, target_width), "int32")
        for row, (s, t) in enumerate(zip(sources, targets)):
            encoder[row, : len(s)] = s
            decoder[row, : len(t) + 1] = [tokenizer.start_id] + t
            labels[row, : len(t) + 1] = t + [tokenizer.end_id]
        x = {"encoder_token_ids": encoder, "decoder_token_ids": decoder}
        model.compile(
            optimizer=keras.optimizers.Adam(1e-4),
            loss=LabelSmoothedCrossEntropy(0.1, pad_id=0),
            jit_compile=keras.backend.backend() != "torch",
        )
        for _ in range(3):  # compiles
            model.train_on_batch(x, labels)
        times = []
        for _ in range(args.lora_steps):
            started = time.perf_counter()
            model.train_on_batch(x, labels)
            times.append(time.perf_counter() - started)
        trainable = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
        total = sum(int(np.prod(v.shape)) for v in model.weights)
        state = sum(
            int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.optimizer.variables
        )
        rows.append(
            dict(
                name=name,
                ms=1000 * statistics.median(times),
                trainable=trainable,
                total=total,
                state=state,
            )
        )
    return lora_table(rows)


def lora_table(rows):
    base = rows[0]
    header = (
        "fine-tuning",
        "step ms",
        "vs full",
        "trainable parameters",
        "of all",
        "Adam state MB",
    )
    cells = [
        (
            row["name"],
            f"{row['ms']:,.0f}",
            f"{row['ms'] / base['ms']:.2f}",
            f"{row['trainable']:,}",
            f"{row['trainable'] / row['total']:.2%}",
            f"{row['state'] / 1e6:.1f}",
        )
        for row in rows
    ]
    return markdown_table(header, cells)


def append(path, title, text):
    with open(path, "a", encoding="utf-8") as file:
        file.write(f"\n## {title}\n\n{text}")


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import warnings

    # Keras warns for every layer without weights to quantise (norms, dropout, ...).
    warnings.filterwarnings("ignore", message=".*does not have a `quantize` method.*")
    warnings.filterwarnings("ignore", message=".*Invalid quantization mode.*")
    from examples.translation.data import load_multi30k

    started = time.perf_counter()
    backend, found = versions()
    test_pairs = load_multi30k("test_2016_flickr", limit=args.eval_pairs)
    print(f"backend {backend}; " + ", ".join(f"{k} {v}" for k, v in found.items()))
    rows = []
    for mode in args.modes:
        t0 = time.perf_counter()
        row = measure_mode(args, mode, test_pairs)
        rows.append(row)
        print(
            f"{mode}: {row['size'] / 1e6:.1f} MB, greedy {row['greedy']:,.0f} tok/s, "
            f"beam {row['beam']:,.0f} tok/s, BLEU {row['bleu']:.2f} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    table = quantization_table(rows)
    print()
    print(table)
    lora_table = None
    if args.lora:
        lora_table = lora_measurement(args, load_multi30k("train", limit=args.lora_batch))
        print(lora_table)
    elapsed = time.perf_counter() - started
    if args.output:
        label = f" ({args.label})" if args.label else ""
        command = "python " + shlex.join(
            [os.path.relpath(os.path.abspath(__file__))] + (argv or sys.argv[1:])
        )
        notes = (
            f"Command: `{command}`  \nCommit: {git_revision()}; backend {backend}; "
            + ", ".join(f"{k} {v}" for k, v in found.items())
            + f"  \nMachine: {cpu_name()}, {os.cpu_count()} cores; wall time {elapsed:.0f} s  \n"
            f"Model: `{args.run_dir}/model`; BLEU on {len(test_pairs)} test_2016_flickr "
            f"sentences (beam {args.beam_size}, length penalty {args.length_penalty}); speed on "
            f"the first {args.speed_sentences} (median of {args.rounds} passes, CPU).\n\n"
        )
        text = notes + table
        if lora_table:
            text += (
                f"\nLoRA (rank {args.lora_rank}, every attention and feed-forward projection) "
                f"against full fine-tuning: Adam, {args.lora_batch} training pairs a step, "
                f"median of {args.lora_steps} compiled steps.\n\n" + lora_table
            )
        append(args.output, f"Quantisation and LoRA{label}", text)
        print(f"appended to {args.output}")


if __name__ == "__main__":
    main()
