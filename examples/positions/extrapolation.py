"""Train language models on short windows and measure their perplexity on longer ones.

Press et al. (2022, "Train Short, Test Long") train a language model on sequences of
`L` tokens and evaluate it on `L`, `2L`, `4L`, ... tokens of held-out text. The paper
(Vaswani et al., 2017, section 3.5) chose sinusoids hoping they "may allow the model
to extrapolate to sequence lengths longer than the ones encountered during training";
this command measures that claim for each choice of `position`: the same
`TransformerLM`, data, steps and seed, trained on windows of `--train-length` tokens of
IMDB training reviews, then scored on the same held-out tokens (IMDB test reviews) cut
into non-overlapping windows of 1, 2, 4 and 8 times that length.

Runs:
    python -m examples.positions.extrapolation --data-dir DIR          # about 12 minutes
    python -m examples.positions.extrapolation --data-dir DIR --quick  # under a minute

`DIR` holds the IMDB `train.jsonl.gz` and `test.jsonl.gz`
(`python -m examples.text_classification.download_imdb --output-dir DIR`). Writes
`results.json` and `extrapolation.png` under `--output-dir` and prints the table.
"""

import argparse
import json
import math
import os
import time

import keras
import numpy as np

from examples.command_line import (
    add_compilation_cache_flag,
    add_debug_flags,
    check_compilation_cache,
    check_positive,
    check_positive_number,
    command_line,
    fill_defaults,
    run_command,
    start_compilation_cache,
)
from examples.text_classification import data
from keras_transformer.models import TransformerLM
from keras_transformer.text import SubwordTokenizer

POSITIONS = ("sinusoidal", "learned", "rotary", "alibi")
# The evaluation lengths, as multiples of the training length.
FACTORS = (1, 2, 4, 8)

# About 3 minutes a position on 2 CPU cores (RESULTS.md).
FULL = dict(
    train_reviews=8000,
    eval_reviews=1000,
    eval_windows=32,
    vocabulary_size=2000,
    train_length=64,
    num_layers=2,
    hidden_dim=128,
    num_heads=4,
    intermediate_dim=512,
    batch_size=32,
    steps=800,
    learning_rate=1e-3,
)
QUICK = dict(
    FULL,
    train_reviews=300,
    eval_reviews=60,
    eval_windows=4,
    vocabulary_size=500,
    train_length=16,
    num_layers=1,
    hidden_dim=32,
    num_heads=2,
    intermediate_dim=64,
    batch_size=16,
    steps=20,
)
POSITIVE = tuple(name for name in FULL if name != "learning_rate")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m examples.positions.extrapolation",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--data-dir", required=True, help="IMDB folder (train/test.jsonl.gz)")
    parser.add_argument("--quick", action="store_true", help="a tiny model and 20 steps")
    parser.add_argument(
        "--positions",
        default=",".join(POSITIONS),
        help=f"comma-separated, among {', '.join(POSITIONS)} (default: all four)",
    )
    parser.add_argument("--output-dir", default=None, help="defaults to runs/extrapolation[-quick]")
    for name in POSITIVE:
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0, help="data order, dropout and weights")
    add_compilation_cache_flag(parser)
    add_debug_flags(parser)
    args = parser.parse_args(argv)
    fill_defaults(args, QUICK if args.quick else FULL)
    for name in POSITIVE:
        check_positive(parser, name, getattr(args, name))
    check_positive_number(parser, "learning_rate", args.learning_rate)
    args.compilation_cache = check_compilation_cache(parser, args.compilation_cache)
    args.positions = [p.strip() for p in args.positions.split(",") if p.strip()]
    unknown = [p for p in args.positions if p not in POSITIONS]
    if unknown or not args.positions:
        parser.error(f"--positions must list some of {', '.join(POSITIONS)}; got {unknown}")
    if args.hidden_dim % args.num_heads or (args.hidden_dim // args.num_heads) % 2:
        parser.error("--hidden-dim / --num-heads must be an even integer (rotary turns pairs)")
    if not os.path.isdir(args.data_dir):
        parser.error(f"--data-dir '{args.data_dir}' is not a directory")
    if args.output_dir is None:
        name = "extrapolation-quick" if args.quick else "extrapolation"
        args.output_dir = os.path.join("runs", name)
    return args


def token_stream(tokenizer, texts):
    """Every text's ids followed by the end id, as one int32 array."""
    pieces = tokenizer.tokenize(texts).to_list()
    ids = [token for piece in pieces for token in piece + [tokenizer.end_id]]
    return np.asarray(ids, dtype="int32")


def training_windows(stream, length, seed):
    """Non-overlapping `(inputs, targets)` windows of `length` tokens, shuffled."""
    count = (len(stream) - 1) // length
    starts = np.random.default_rng(seed).permutation(count) * length
    windows = np.stack([stream[s : s + length + 1] for s in starts])
    return windows[:, :-1], windows[:, 1:]


def evaluation_tokens(stream, longest, windows):
    """The first `longest * windows + 1` tokens: every length scores the same targets."""
    needed = longest * windows + 1
    if len(stream) < needed:
        raise ValueError(
            f"The held-out text has {len(stream)} tokens, fewer than the {needed} needed for "
            f"{windows} windows of {longest}: pass more --eval-reviews or fewer --eval-windows."
        )
    return stream[:needed]


def perplexity(model, tokens, length, batch_size=8):
    """exp(mean negative log-likelihood) of `tokens[1:]`, in windows of `length` tokens.

    Each window starts afresh (non-overlapping evaluation, as in Press et al.), so a
    window of `length` tokens asks the model to read up to `length` positions.
    """
    count = (len(tokens) - 1) // length
    inputs = tokens[: count * length].reshape(count, length)
    targets = tokens[1 : count * length + 1].reshape(count, length)
    total = 0.0
    for begin in range(0, count, batch_size):
        logits = keras.ops.convert_to_numpy(model(inputs[begin : begin + batch_size]))
        logits = logits.astype("float64")
        logits -= logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        chosen = np.take_along_axis(log_probs, targets[begin : begin + batch_size, :, None], -1)
        total -= float(chosen.sum())
    return math.exp(total / targets.size)


def make_model(args, position, vocabulary_size):
    return TransformerLM(
        vocabulary_size,
        num_layers=args.num_layers,
        hidden_dim=args.hidden_dim,
        num_heads=args.num_heads,
        intermediate_dim=args.intermediate_dim,
        dropout=0.1,
        norm_first=True,
        position=position,
        # Only the first `train_length` rows of a learned table are ever trained.
        max_sequence_length=args.train_length * FACTORS[-1],
    )


def train(args, position, vocabulary_size, inputs, targets):
    keras.utils.set_random_seed(args.seed)
    model = make_model(args, position, vocabulary_size)
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0,
        decay_steps=args.steps,
        warmup_target=args.learning_rate,
        warmup_steps=max(1, args.steps // 10),
    )
    model.compile(
        keras.optimizers.Adam(schedule),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=keras.backend.backend() == "jax",
    )
    rows = args.steps * args.batch_size
    if len(inputs) < rows:
        repeats = -(-rows // len(inputs))
        inputs, targets = np.concatenate([inputs] * repeats), np.concatenate([targets] * repeats)
    started = time.time()
    history = model.fit(
        inputs[:rows], targets[:rows], batch_size=args.batch_size, epochs=1, verbose=0
    )
    return model, history.history["loss"][-1], time.time() - started


def save_figure(results, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    lengths = [args.train_length * f for f in FACTORS]
    for position, row in results.items():
        axes.plot(lengths, [row["perplexity"][str(n)] for n in lengths], marker="o", label=position)
    axes.axvline(args.train_length, color="grey", linestyle=":", linewidth=1)
    axes.set_xscale("log", base=2)
    axes.set_xticks(lengths, [str(n) for n in lengths])
    axes.set_xlabel(f"evaluation length (tokens); trained on {args.train_length}")
    axes.set_ylabel("perplexity on IMDB test reviews")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv=None):
    """Runs the command; a user error ends it with one line on stderr (exit status 2)."""
    return run_command(parse_args, run, argv)


def run(args, argv):
    command = command_line("examples.positions.extrapolation", argv)
    start_compilation_cache(args.compilation_cache)
    train_texts, _ = data.load_imdb("train", args.data_dir, seed=args.seed)
    test_texts, _ = data.load_imdb("test", args.data_dir, seed=args.seed)
    train_texts = [data.clean_imdb_text(t) for t in train_texts[: args.train_reviews]]
    test_texts = [data.clean_imdb_text(t) for t in test_texts[: args.eval_reviews]]
    tokenizer = SubwordTokenizer.train(train_texts, vocabulary_size=args.vocabulary_size)
    inputs, targets = training_windows(
        token_stream(tokenizer, train_texts), args.train_length, args.seed
    )
    longest = args.train_length * FACTORS[-1]
    held_out = evaluation_tokens(token_stream(tokenizer, test_texts), longest, args.eval_windows)
    print(
        f"data: {len(inputs)} training windows of {args.train_length} tokens "
        f"({len(train_texts)} IMDB training reviews, {tokenizer.vocabulary_size} pieces); "
        f"{len(held_out) - 1} held-out tokens of IMDB test reviews"
    )
    results = {}
    for position in args.positions:
        model, loss, seconds = train(args, position, tokenizer.vocabulary_size, inputs, targets)
        scores = {
            str(args.train_length * f): round(perplexity(model, held_out, args.train_length * f), 2)
            for f in FACTORS
        }
        results[position] = {
            "final_loss": round(float(loss), 4),
            "train_seconds": round(seconds, 1),
            "perplexity": scores,
        }
        print(f"{position}: trained in {seconds:.0f} s, final loss {loss:.4f}; perplexity", scores)
    os.makedirs(args.output_dir, exist_ok=True)
    settings = {
        k: v for k, v in vars(args).items() if k not in ("debug", "verbose", "compilation_cache")
    }
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as file:
        json.dump({"command": command, "settings": settings, "results": results}, file, indent=1)
    save_figure(results, args, os.path.join(args.output_dir, "extrapolation.png"))
    lengths = [str(args.train_length * f) for f in FACTORS]
    print("\n| position | " + " | ".join(f"L={n}" for n in lengths) + " |")
    print("| --- |" + " --- |" * len(lengths))
    for position, row in results.items():
        cells = " | ".join(f"{row['perplexity'][n]:.2f}" for n in lengths)
        print(f"| {position} | {cells} |")
    return results


if __name__ == "__main__":
    main()
