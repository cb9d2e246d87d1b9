"""Pretrain a Transformer encoder on the training texts (masked LM or ELECTRA).

Learns a SentencePiece vocabulary (with a `<mask>` id) on the IMDB training reviews
and the SST-2 training sentences — never on test or dev text — and trains, for a
number of epochs or minutes, either a `MaskedLM` (`--objective mlm`, BERT's objective:
15% of the tokens hidden, 80/10/10, masked afresh each epoch) or an
`ElectraPretrainer` (`--objective electra`: a small generator fills the masked
positions, the encoder learns to tell every token replaced or original). Saves the
model and tokenizer with `save_pretrained` (`<output-dir>/model`), which
`train --init-from` fine-tunes.

Runs:
    python -m examples.text_classification.pretrain --imdb-dir DIR --minutes 20
    python -m examples.text_classification.pretrain --quick     # SST-2 only, a minute
    python -m examples.text_classification.pretrain --imdb-dir DIR --objective electra

`--pack` concatenates the texts into full rows of `--max-length` pieces instead of one
text per row; `--curve FILE` writes the masked-token loss and accuracy on a fixed probe
of training texts against the tokens seen (see `pretraining_curve.py`).

Under XLA (JAX) the batches take a few fixed shapes
(`make_masked_lm_dataset(fixed_shapes=True)`), so the training step compiles a few times,
not once per batch; `--verbose` prints the compilations per epoch.
"""

import argparse
import os
import sys
import time

import keras

import keras_transformer as kt
from examples.compilations import CompilationCounter, batch_shapes
from examples.text_classification import data
from examples.text_classification.cli import (
    add_common_flags,
    add_model_flags,
    check_compilation_cache,
    check_positive,
    check_rate,
    command_line,
    fill_defaults,
    model_overrides,
    run_command,
    start_compilation_cache,
)
from examples.text_classification.pretraining_curve import (
    PretrainingCurve,
    count_tokens,
    probe_batches,
)
from examples.text_classification.schedule import WARMUP_FRACTION, fine_tuning_optimizer

# What `SubwordTokenizer.save` writes.
TOKENIZER_FILE = "subword.model"

OBJECTIVES = {"mlm": "masked_lm", "electra": "replaced_token_detection"}
# `minutes` caps the six epochs at an hour on CPUs slower than the one of RESULTS.md's
# recorded runs, where they take 16 minutes.
FULL = dict(
    vocabulary_size=8000,
    preset="tiny",
    max_length=256,
    batch_size=32,
    epochs=6,
    learning_rate=1e-3,
    minutes=60,
    imdb_limit=None,
    pack=False,
)
# SST-2's sentences alone (no IMDB reviews), in about a minute.
QUICK = dict(FULL, vocabulary_size=4000, max_length=64, batch_size=64, epochs=1, imdb_limit=0)


class TimeLimit(keras.callbacks.Callback):
    """Stops `fit` after the batch that passes `minutes` of training, or after `steps` steps."""

    def __init__(self, minutes, steps=None):
        super().__init__()
        self.seconds = None if minutes is None else 60 * minutes
        self.steps = steps

    def on_train_begin(self, logs=None):
        self.started = time.time()
        self.done = 0

    def on_train_batch_end(self, batch, logs=None):
        self.done += 1
        if self.seconds is not None and time.time() - self.started > self.seconds:
            self.model.stop_training = True
        if self.steps is not None and self.done >= self.steps:
            self.model.stop_training = True


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="SST-2 sentences only, a minute")
    parser.add_argument(
        "--objective",
        default="mlm",
        choices=list(OBJECTIVES),
        help="mlm: masked language model (BERT); electra: replaced-token detection",
    )
    parser.add_argument("--imdb-dir", default=None, help="IMDB folder (train.jsonl.gz is used)")
    parser.add_argument("--sst2-dir", default=None, help="defaults to the copy in the repository")
    parser.add_argument("--output-dir", default=None, help="defaults to runs/pretrain[-quick]")
    parser.add_argument("--vocabulary-size", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--minutes", type=float, default=None, help="stop training after this")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="train this many steps (the learning-rate schedule's length) instead of --epochs",
    )
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--mask-rate", type=float, default=0.15)
    parser.add_argument(
        "--warmup-fraction",
        type=float,
        default=WARMUP_FRACTION,
        help="share of the steps over which the learning rate rises",
    )
    parser.add_argument(
        "--pack",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="concatenate the texts into full rows of --max-length pieces",
    )
    parser.add_argument(
        "--tokenizer", default=None, help="reuse the tokenizer saved in this directory"
    )
    parser.add_argument(
        "--curve", default=None, help="write the probe's learning curve to this CSV file"
    )
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--imdb-limit", type=int, default=None, help="use N IMDB reviews")
    add_model_flags(parser)
    add_common_flags(parser)
    args = parser.parse_args(argv)
    fill_defaults(args, QUICK if args.quick else FULL)
    for name in ("vocabulary_size", "max_length", "batch_size", "epochs"):
        check_positive(parser, name, getattr(args, name))
    if args.max_length < 3:
        parser.error(f"--max-length must be at least 3; got {args.max_length}")
    if args.minutes is not None and not args.minutes > 0:
        parser.error(f"--minutes must be positive; got {args.minutes}")
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be positive; got {args.learning_rate}")
    if not 0 < args.mask_rate < 1:
        parser.error(f"--mask-rate must be in (0, 1); got {args.mask_rate}")
    if args.steps is not None:
        check_positive(parser, "steps", args.steps)
    if not 0 <= args.warmup_fraction < 1:
        parser.error(f"--warmup-fraction must be in [0, 1); got {args.warmup_fraction}")
    if args.tokenizer is not None and not os.path.isfile(
        os.path.join(args.tokenizer, TOKENIZER_FILE)
    ):
        parser.error(f"--tokenizer: no {TOKENIZER_FILE} in '{args.tokenizer}'")
    if args.curve is not None and not os.path.isdir(os.path.dirname(args.curve) or "."):
        parser.error(f"--curve: no directory for '{args.curve}'")
    check_rate(parser, "dropout", args.dropout)
    args.overrides = model_overrides(parser, args)
    args.compilation_cache = check_compilation_cache(parser, args.compilation_cache)
    if args.imdb_limit is not None and args.imdb_limit < 0:
        parser.error(f"--imdb-limit must be 0 or more; got {args.imdb_limit}")
    if not args.quick and args.imdb_dir is None:
        parser.error("--imdb-dir is required (or pass --quick to pretrain on SST-2 alone)")
    if args.output_dir is None:
        args.output_dir = os.path.join("runs", "pretrain-quick" if args.quick else "pretrain")
    return args


def training_texts(args):
    """SST-2 training sentences and IMDB training reviews: no dev or test text."""
    texts, _ = data.load_sst2("train", args.sst2_dir)
    count = {"sst2_train": len(texts), "imdb_train": 0}
    if args.imdb_dir is not None and args.imdb_limit != 0:
        reviews, _ = data.load_imdb("train", args.imdb_dir, seed=args.seed)
        reviews = [data.clean_imdb_text(review) for review in reviews[: args.imdb_limit]]
        count["imdb_train"] = len(reviews)
        texts = list(texts) + reviews
    return texts, count


def main(argv=None):
    return run_command(parse_args, run, argv)


def run(args, argv):
    import tensorflow as tf

    from keras_transformer.saving import save_pretrained
    from keras_transformer.text import SubwordTokenizer, make_masked_lm_dataset
    from keras_transformer.text.classification_dataset import classification_batch_shapes

    command = command_line("pretrain", argv)
    start_compilation_cache(args.compilation_cache)
    keras.utils.set_random_seed(args.seed)
    started = time.time()
    texts, count = training_texts(args)
    print(f"data: {count['sst2_train']} SST-2 train sentences, {count['imdb_train']} IMDB reviews")
    if args.tokenizer is not None:
        tokenizer = SubwordTokenizer.load(args.tokenizer)
        if tokenizer.mask_id is None:
            raise ValueError(f"--tokenizer '{args.tokenizer}' has no <mask> piece")
        print(f"tokenizer: '{args.tokenizer}', {tokenizer.vocabulary_size} pieces")
    else:
        tokenizer = SubwordTokenizer.train(
            texts, vocabulary_size=args.vocabulary_size, mask_token=True
        )
        print(f"tokenizer: SentencePiece BPE with <mask>, {tokenizer.vocabulary_size} pieces")
    model = kt.models.build(
        OBJECTIVES[args.objective],
        preset=args.preset,
        precision=args.precision,
        vocabulary_size=tokenizer.vocabulary_size,
        **args.overrides,
    )
    train_data = make_masked_lm_dataset(
        texts,
        tokenizer,
        batch_size=args.batch_size,
        max_length=args.max_length,
        mask_rate=args.mask_rate,
        seed=args.seed,
        # XLA compiles per shape; the plain TensorFlow runtime is faster on unpadded batches.
        fixed_shapes=bool(model.jit_compile),
        pack=args.pack,
    )
    # A known length gives the progress bar its total and spares Keras's out-of-data warning.
    shapes = batch_shapes(train_data)
    steps_per_epoch = sum(shapes.values())
    if model.jit_compile:
        bound = len(classification_batch_shapes(args.batch_size, args.max_length))
        print(f"batch shapes: fixed under XLA, {len(shapes)} of at most {bound}")
    else:
        print(f"batch shapes: as the data come ({len(shapes)}; no XLA)")
    train_data = train_data.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))
    # With --steps the schedule runs its course over those steps, whatever an epoch holds.
    total_steps = args.steps or steps_per_epoch * args.epochs
    epochs = -(-total_steps // steps_per_epoch)
    # Recompiled with the fine-tuning optimizer (AdamW, warmup and cosine decay) over the
    # planned steps; the loss and metric stay `build`'s: label 0 marks unmasked slots.
    optimizer = fine_tuning_optimizer(
        args.learning_rate, total_steps, warmup_fraction=args.warmup_fraction
    )
    model.compile(
        optimizer=optimizer,
        loss=model.loss,
        metrics=[kt.training.MaskedAccuracy(model.pad_id, name="masked_accuracy")],
    )
    os.makedirs(args.output_dir, exist_ok=True)
    counter = CompilationCounter()
    curve = []
    if args.curve is not None:
        train_data, counters = count_tokens(train_data, tokenizer.pad_id)
        probe = probe_batches(texts, tokenizer)
        curve = [PretrainingCurve(args.curve, probe, counters, tokenizer.pad_id)]
    history = model.fit(
        train_data,
        epochs=epochs,
        callbacks=[
            # The previous backup too: a run killed while the backup is written falls back to it.
            keras.callbacks.BackupAndRestore(
                os.path.join(args.output_dir, "backup"), double_checkpoint=True
            ),
            TimeLimit(args.minutes, args.steps),
            *curve,
            *([counter] if args.verbose else []),
        ],
        verbose=1 if sys.stdout.isatty() else 2,
        shuffle=False,  # the dataset shuffles itself; Keras cannot shuffle a tf.data.Dataset
    )
    minutes = (time.time() - started) / 60
    for line in counter.summary():
        print(line)
    accuracy = round(float(history.history["masked_accuracy"][-1]), 4)
    what = (
        "generator's masked-token accuracy"
        if args.objective == "electra"
        else ("masked-token accuracy")
    )
    print(f"pretrained in {minutes:.1f} min; {what} (last epoch) {accuracy}")
    metadata = {
        "task": OBJECTIVES[args.objective],
        "objective": args.objective,
        "packed": args.pack,
        "data_set": "SST-2 train sentences + IMDB train reviews (no dev or test text)",
        "texts": count,
        "max_length": args.max_length,
        "masked_accuracy": accuracy,
        "history": {k: [round(float(v), 5) for v in vs] for k, vs in history.history.items()},
        "command": command,
        "training_minutes": round(minutes, 1),
    }
    if curve:
        metadata["curve"] = curve[0].rows
    directory = save_pretrained(model, os.path.join(args.output_dir, "model"), tokenizer, metadata)
    print(f"saved the {type(model).__name__} and its tokenizer to {directory}")
    print(f"  fine-tune: python -m examples.text_classification.train --init-from {directory}")
    return metadata


if __name__ == "__main__":
    main()
