"""Train an English→German Transformer on Multi30k and score it with sacreBLEU.

Learns a shared SentencePiece vocabulary from the training data, trains a
`keras_transformer.models.build("translation", ...)` model with the paper's
recipe (Noam schedule, label smoothing 0.1, Adam β2=0.98) on token-count batches,
averages the last checkpoints, translates val and test_2016_flickr with beam
search (α 0.6) and prints cased and lowercased sacreBLEU (13a tokenisation),
sample translations, and saves the model, tokenizer and scores with
`save_pretrained` (`<output-dir>/model`, for `examples.translation.translate`), a
string-to-string SavedModel with `export_serving` (`<output-dir>/serving`), and
attention and position-table pictures.

With `--marian` the model takes Marian's layout and is also written as a Hugging Face
MarianMT folder (`<output-dir>/huggingface`, for transformers and CTranslate2);
`--init-from DIR` fine-tunes such a folder (a Hugging Face MarianMT checkpoint) with its
own tokenizer instead of training from scratch.

Runs:
    python -m examples.translation.train --quick      # a few minutes on 2 CPU cores
    python -m examples.translation.train              # the full run (see RESULTS.md)
    KERAS_BACKEND=jax python -m examples.translation.train --quick --mesh 8   # 8 devices
    python -m examples.translation.train --quick --jit-compile on --verbose    # TF with XLA

Under XLA (JAX, or TensorFlow with `--jit-compile on`) the batches take a few fixed
shapes (`make_translation_dataset(fixed_shapes=True)`), so the training and evaluation
steps compile a few times, not once per batch; `--verbose` prints each epoch's time,
tokens per second and compilations. `--fixed-shapes on|off` chooses the padding whatever
the backend: a long run under XLA may spend less time on unpadded batches' arithmetic than
it spends compiling their shapes (see benchmarks/RESULTS.md). On JAX the compiled steps
are kept in runs/jax_compilation_cache, so the next run of the same model loads them
(`--compilation-cache DIR|off`, examples/compilation_cache.py).

On a GPU the batches default to the paper's 25,000 tokens a side, elsewhere to 4,096
(`--tokens-per-batch` decides when given), and the learning-rate warmup then takes fewer
steps, covering as many tokens as the CPU default's; the run prints which applied.
"""

import argparse
import collections
import json
import os
import sys
import time

import keras
import sacrebleu
import tensorflow as tf

import keras_transformer as kt
from examples.command_line import (
    add_compilation_cache_flag,
    add_debug_flags,
    add_mesh_flag,
    add_precision_flag,
    check_compilation_cache,
    check_mesh,
    check_non_negative,
    check_non_negative_number,
    check_positive,
    check_positive_number,
    check_rate,
    command_line,
    fill_defaults,
    prepare_devices,
    run_command,
    start_compilation_cache,
)
from examples.compilations import CompilationCounter
from examples.translation.data import DEFAULT_DATA_DIR, load_multi30k
from examples.translation.pictures import save_attention_picture, save_position_picture
from examples.translation.settings import FULL, GPU_TOKENS_PER_BATCH, QUICK
from examples.translation.tokens_per_batch import choose_tokens_per_batch, warmup_for
from examples.translation.translator import translate
from keras_transformer.models.device import detect_device
from keras_transformer.saving import (
    export_serving,
    load_huggingface,
    save_huggingface,
    save_pretrained,
)
from keras_transformer.text import (
    SubwordTokenizer,
    make_translation_dataset,
    translation_batch_shapes,
)
from keras_transformer.training import CheckpointAveraging, EpochSeeds


def _subword_dropout(text):
    try:
        values = tuple(float(value) for value in text.split(","))
    except ValueError:
        values = ()
    if len(values) not in (1, 2) or not all(0 <= value < 1 for value in values):
        raise argparse.ArgumentTypeError(
            f"expected P or SOURCE,TARGET with each in [0, 1), got {text!r}"
        )
    return values[0] if len(values) == 1 else values


def _add_switch(parser, name, help_text):
    """A flag of `auto` (the default), `on` or `off`, which `_switch` reads."""
    parser.add_argument(name, choices=["auto", "on", "off"], default="auto", help=help_text)


def _switch(value, auto):
    """`True` or `False` for a flag of `_add_switch`'s; `auto` for `"auto"`."""
    return {"auto": auto, "on": True, "off": False}[value]


POSITIVE = (
    "epochs",
    "tokens_per_batch",
    "warmup_steps",
    "num_layers",
    "hidden_dim",
    "intermediate_dim",
    "num_heads",
    "train_pairs",
    "eval_pairs",
    "beam_size",
    "average_checkpoints",
)
NON_NEGATIVE = ("checkpoint_every", "min_tokens_per_batch", "seed")
# `SubwordTokenizer.train`'s least size with byte fallback: 4 special ids, 256 bytes, 1 piece.
MIN_VOCABULARY_SIZE = 261
# The learned position table's rows with --position learned.
LEARNED_POSITIONS = 512


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m examples.translation.train", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a 2+2-layer model, 2 epochs of every pair, 200 pairs scored: a few minutes",
    )
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="folder of Multi30k .gz files")
    parser.add_argument("--output-dir", default=None, help="defaults to runs/multi30k[-quick]")
    parser.add_argument("--preset", default=None, choices=["tiny", "small", "base", "big"])
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument(
        "--tokens-per-batch",
        type=int,
        default=None,
        help=f"the token budget of a batch, per side (default: {GPU_TOKENS_PER_BATCH:,} on a "
        f"GPU, the paper's batches of about {GPU_TOKENS_PER_BATCH:,} source and target "
        f"tokens; {FULL['tokens_per_batch']:,} on a CPU, the size the CPU runs were "
        "timed with)",
    )
    parser.add_argument("--vocabulary-size", type=int, default=None)
    parser.add_argument("--warmup-steps", type=int, default=None)
    parser.add_argument(
        "--learning-rate-scale", type=float, default=None, help="multiplier on the Noam schedule"
    )
    parser.add_argument("--num-layers", type=int, default=None, help="encoder and decoder blocks")
    parser.add_argument("--hidden-dim", type=int, default=None)
    parser.add_argument("--intermediate-dim", type=int, default=None)
    parser.add_argument("--num-heads", type=int, default=None)
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument(
        "--norm-first",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pre-norm blocks (post-norm, the paper's, with --no-norm-first)",
    )
    parser.add_argument(
        "--position",
        choices=["sinusoidal", "learned", "rotary", "alibi", "none"],
        default="sinusoidal",
        help="positions: the paper's sinusoids added to the embeddings (the default), a "
        "learned table, rotary queries and keys, ALiBi's distance penalty, or none",
    )
    parser.add_argument("--train-pairs", type=int, default=None, help="use the first N pairs")
    parser.add_argument("--eval-pairs", type=int, default=None, help="score the first N pairs")
    parser.add_argument("--beam-size", type=int, default=None, help="1: greedy search")
    parser.add_argument(
        "--length-penalty", type=float, default=0.6, help="GNMT alpha of beam search; 0: none"
    )
    parser.add_argument("--average-checkpoints", type=int, default=None)
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="save a checkpoint to average every N updates (0: once per epoch)",
    )
    parser.add_argument(
        "--min-tokens-per-batch",
        type=int,
        default=None,
        help="drop the flushed bucket leftovers smaller than this (training only)",
    )
    parser.add_argument(
        "--subword-dropout",
        type=_subword_dropout,
        default=None,
        help="BPE-dropout on the training pairs: P for both sides, or SOURCE,TARGET "
        "(e.g. 0.1,0 for the source only); 0: off",
    )
    add_precision_flag(parser)
    _add_switch(
        parser,
        "--fixed-shapes",
        "pad batches to a few fixed shapes, so that XLA compiles a few times; auto: on when "
        "the training step is compiled with XLA",
    )
    _add_switch(
        parser,
        "--jit-compile",
        "compile the training step with XLA; auto: on with JAX or a GPU, off with TensorFlow "
        "on a CPU (faster there)",
    )
    add_mesh_flag(parser)
    add_compilation_cache_flag(parser)
    parser.add_argument(
        "--marian",
        action="store_true",
        help="Marian's layout (sines then cosines, layer-norm epsilon 1e-5, a logits bias, "
        "the pad token as start token); also writes <output-dir>/huggingface, a MarianMT folder",
    )
    parser.add_argument(
        "--init-from",
        default=None,
        metavar="DIR",
        help="fine-tune a Hugging Face MarianMT folder (config.json, model.safetensors, "
        "source.spm, target.spm, vocab.json) with its tokenizer; implies --marian",
    )
    parser.add_argument("--seed", type=int, default=0, help="data order, dropout and weights")
    add_debug_flags(parser, training=True)
    args = parser.parse_args(argv)
    given = (*ARCHITECTURE_FLAGS, "norm_first", "tokens_per_batch", "warmup_steps")
    args.explicit = {name for name in given if getattr(args, name) is not None}
    fill_defaults(args, QUICK if args.quick else FULL)
    if args.output_dir is None:
        args.output_dir = os.path.join("runs", "multi30k-quick" if args.quick else "multi30k")
    check_arguments(parser, args)
    return args


def check_arguments(parser, args):
    """Every value in range, and the folders usable, before anything is read or written."""
    for name in POSITIVE:
        if getattr(args, name) is not None:
            check_positive(parser, name, getattr(args, name))
    for name in NON_NEGATIVE:
        if getattr(args, name) is not None:
            check_non_negative(parser, name, getattr(args, name))
    if args.vocabulary_size < MIN_VOCABULARY_SIZE:
        parser.error(
            f"--vocabulary-size must be at least {MIN_VOCABULARY_SIZE}; got {args.vocabulary_size}"
        )
    check_positive_number(parser, "learning_rate_scale", args.learning_rate_scale)
    check_non_negative_number(parser, "length_penalty", args.length_penalty)
    if args.dropout is not None:
        check_rate(parser, "dropout", args.dropout)
    args.mesh = check_mesh(parser, args.mesh)
    args.compilation_cache = check_compilation_cache(parser, args.compilation_cache)
    if not os.path.isdir(args.data_dir):
        parser.error(f"--data-dir '{args.data_dir}' is not a directory")
    if os.path.exists(args.output_dir) and not os.path.isdir(args.output_dir):
        parser.error(f"--output-dir '{args.output_dir}' exists and is not a directory")
    if args.init_from is not None:
        check_init_from(parser, args)
    if args.marian:
        check_marian(parser, args)


# The architecture comes from the folder given to --init-from, so these flags cannot apply.
ARCHITECTURE_FLAGS = ("preset", "num_layers", "hidden_dim", "intermediate_dim", "num_heads")


def check_init_from(parser, args):
    config = os.path.join(args.init_from, "config.json")
    if not os.path.isfile(config):
        parser.error(
            f"--init-from '{args.init_from}' has no config.json: pass a Hugging Face MarianMT "
            "folder (or the huggingface/ folder of a run with --marian)"
        )
    for name in ARCHITECTURE_FLAGS:
        if name in args.explicit:
            parser.error(f"--{name.replace('_', '-')} cannot change the model of --init-from")
    args.marian = True


def check_marian(parser, args):
    if args.position != "sinusoidal":
        parser.error("--position: Marian's positions are sinusoidal")
    if "norm_first" in args.explicit and args.norm_first:
        parser.error("--norm-first: Marian's blocks are post-norm (--no-norm-first)")
    args.norm_first = False


def load_marian(directory):
    """The model and tokenizer of a MarianMT folder, or a one-line error."""
    bundle = load_huggingface(directory)
    if not isinstance(bundle.model, kt.models.Seq2SeqTransformer):
        raise ValueError(
            f"--init-from '{directory}' holds a {bundle.metadata['architecture']}, not a "
            "MarianMT translation model"
        )
    if bundle.tokenizer is None:
        raise ValueError(
            f"--init-from '{directory}' has no tokenizer files (source.spm, target.spm, "
            "vocab.json): the data cannot be tokenized as the model was trained"
        )
    print(f"model and tokenizer: {directory} ({bundle.tokenizer.vocabulary_size} pieces)")
    return bundle.model, bundle.tokenizer


def marian_options(tokenizer):
    """Seq2SeqTransformer options that make the model a MarianMT model."""
    return dict(
        interleave_sinusoids=False,
        layer_norm_epsilon=1e-5,
        norm_first=False,
        output_bias=True,
        zero_pad_embedding=True,
        pad_id=tokenizer.pad_id,
        start_id=tokenizer.start_id,
        end_id=tokenizer.end_id,
    )


def pretrained_architecture(model):
    """The arguments that fix the architecture of `model`, to build it with the recipe."""
    config = model.get_config()
    names = kt.models.Seq2SeqTransformer.CONFIG_ARGUMENTS
    return {name: config[name] for name in names if name in config}


def bleu(hypotheses, references):
    cased = sacrebleu.corpus_bleu(hypotheses, [references])
    lowercased = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True)
    return {"bleu": round(cased.score, 2), "bleu_lowercase": round(lowercased.score, 2)}


def main(argv=None):
    """Runs the command; a user error ends it with one line on stderr (exit status 2)."""
    return run_command(parse_args, run, argv)


def resumed_epoch(backup_dir):
    """The epoch a restarted run resumes at: what `BackupAndRestore` will restore.

    Read from the metadata file the callback keeps beside its weights; 0 without one.
    """
    try:
        with open(os.path.join(backup_dir, "training_metadata.json"), encoding="utf-8") as file:
            return int(json.load(file)["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def shapes_and_tokens(dataset, pad_id):
    """A pass over `dataset`: its batch shapes (a Counter) and its source + target tokens."""
    shapes = collections.Counter()
    tokens = 0
    for inputs, labels in dataset:
        shapes[(tuple(inputs["encoder_token_ids"].shape), tuple(labels.shape))] += 1
        tokens += int(tf.math.count_nonzero(inputs["encoder_token_ids"] != pad_id))
        tokens += int(tf.math.count_nonzero(labels != pad_id))
    return shapes, tokens


def print_batch_shapes(args, fixed_shapes, batch_size_multiple, train_shapes, val_shapes):
    """One line: how many batch shapes training and validation bring, and the bound."""
    seen = f"{len(train_shapes)} in training, {len(val_shapes)} in validation"
    if not fixed_shapes:
        why = "XLA compiles each" if args.compiled else "no XLA, nothing compiles per shape"
        print(f"batch shapes: as the data come ({seen}; {why})")
        return
    bound = translation_batch_shapes(args.tokens_per_batch, batch_size_multiple=batch_size_multiple)
    listed = ", ".join(f"{rows}x{length}" for rows, length in bound)
    print(f"batch shapes: fixed under XLA, at most {len(bound)} (pairs x tokens: {listed}); {seen}")


def run(args, argv):
    command = command_line("examples.translation.train", argv)
    prepare_devices(args.mesh)  # before the backend runs anything
    start_compilation_cache(args.compilation_cache)
    keras.utils.set_random_seed(args.seed)
    started = time.time()

    train_pairs = load_multi30k("train", args.data_dir, limit=args.train_pairs)
    splits = {
        split: load_multi30k(split, args.data_dir, limit=args.eval_pairs)
        for split in ("val", "test_2016_flickr")
    }
    print(f"data: {len(train_pairs)} training pairs from {args.data_dir}")
    requested = args.tokens_per_batch if "tokens_per_batch" in args.explicit else None
    args.tokens_per_batch, why = choose_tokens_per_batch(
        detect_device(), requested, cpu_default=args.tokens_per_batch
    )
    print(f"batches: at most {args.tokens_per_batch:,} tokens per side ({why})")
    if requested is None and "warmup_steps" not in args.explicit:
        default_tokens = (QUICK if args.quick else FULL)["tokens_per_batch"]
        warmup = warmup_for(args.tokens_per_batch, args.warmup_steps, default_tokens)
        if warmup != args.warmup_steps:
            print(
                f"warmup: {warmup} steps, as many tokens as {args.warmup_steps} steps of "
                f"{default_tokens:,} (--warmup-steps decides when given)"
            )
            args.warmup_steps = warmup

    pretrained = None
    if args.init_from is not None:
        pretrained, tokenizer = load_marian(args.init_from)
    else:
        texts = [text for pair in train_pairs for text in pair]
        tokenizer = SubwordTokenizer.train(texts, vocabulary_size=args.vocabulary_size)
        print(f"tokenizer: shared SentencePiece BPE, {tokenizer.vocabulary_size} pieces")
        if args.marian:
            # Marian's ids: `<pad>` last, the decoder starting from it (CTranslate2's layout).
            tokenizer = kt.text.MarianTokenizer.from_subword_tokenizer(tokenizer, pad_last=True)

    overrides = dict(
        source_vocabulary_size=tokenizer.vocabulary_size,
        share_embeddings=True,
        warmup_steps=args.warmup_steps,
        learning_rate_scale=args.learning_rate_scale,
    )
    if args.marian:
        overrides.update(marian_options(tokenizer))
    if pretrained is not None:
        overrides.update(pretrained_architecture(pretrained))
    if args.position != "sinusoidal":
        overrides["position"] = None if args.position == "none" else args.position
    if args.position == "learned":
        # Training pairs are cut at 256 tokens and translations run 50 past their source.
        overrides["max_sequence_length"] = LEARNED_POSITIONS
    sizes = ("num_layers", "hidden_dim", "intermediate_dim", "num_heads", "dropout", "norm_first")
    for name in sizes:
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    # With --mesh, the mesh is checked against the devices and heads here, before anything
    # is written.
    jit_compile = _switch(args.jit_compile, auto="auto")
    model = kt.models.build(
        "translation",
        preset=args.preset,
        precision=args.precision,
        jit_compile=jit_compile,
        mesh=args.mesh,
        **overrides,
    )
    if pretrained is not None:
        model.set_weights(pretrained.get_weights())
        print(f"weights: from {args.init_from}")
    print("model:", json.dumps(model.build_info))

    # Only XLA compiles per shape; the plain TensorFlow runtime is faster on unpadded batches.
    args.compiled = bool(model.jit_compile)
    fixed_shapes = _switch(args.fixed_shapes, auto=args.compiled)
    # The data-parallel replicas split every batch evenly.
    batch_size_multiple = args.mesh[0] if args.mesh else 1
    train_data = make_translation_dataset(
        train_pairs,
        tokenizer,
        tokens_per_batch=args.tokens_per_batch,
        shuffle=True,
        seed=args.seed,
        fixed_shapes=fixed_shapes,
        min_tokens_per_batch=args.min_tokens_per_batch,
        subword_dropout=args.subword_dropout,
        batch_size_multiple=batch_size_multiple,
    )
    val_data = make_translation_dataset(
        splits["val"],
        tokenizer,
        tokens_per_batch=args.tokens_per_batch,
        fixed_shapes=fixed_shapes,
        batch_size_multiple=batch_size_multiple,
    )

    # Bucketing hides the dataset's length from Keras; counting it once gives the first
    # epoch's progress bar its total and catches an empty dataset early. One iterator over
    # the repeated data, cut into epochs by `steps_per_epoch`, then serves the whole run.
    # Passes over the data hold the same number of batches as long as no bucket's leftover
    # batch sits at the `--min-tokens-per-batch` threshold (123 in each of 20 passes over
    # Multi30k); otherwise an epoch may end a batch or two into the next pass.
    train_shapes, tokens_per_epoch = shapes_and_tokens(train_data, tokenizer.pad_id)
    steps_per_epoch = sum(train_shapes.values())
    if steps_per_epoch == 0:
        raise ValueError(
            "No training batch is left: every batch holds fewer than "
            f"--min-tokens-per-batch={args.min_tokens_per_batch} tokens. Lower it."
        )
    # Without a known length Keras reads the validation data until it ends and then warns
    # that the "input ran out of data".
    val_shapes, _ = shapes_and_tokens(val_data, tokenizer.pad_id)
    validation_steps = sum(val_shapes.values())
    val_data = val_data.apply(tf.data.experimental.assert_cardinality(validation_steps))
    print_batch_shapes(args, fixed_shapes, batch_size_multiple, train_shapes, val_shapes)

    # The inputs are good: only now is anything written.
    os.makedirs(args.output_dir, exist_ok=True)
    backup_dir = os.path.join(args.output_dir, "backup")
    # A run killed and started again with the same command resumes at the last finished
    # epoch, on the batches and dropout masks an uninterrupted run would see there.
    initial_epoch = resumed_epoch(backup_dir)
    if initial_epoch:
        print(f"resuming at epoch {initial_epoch + 1} from {backup_dir}")
    callbacks = [
        EpochSeeds(),
        # Before the backup: a run killed between the two saves redoes the epoch and writes
        # the same checkpoint again, instead of missing it.
        CheckpointAveraging(
            os.path.join(args.output_dir, "checkpoints"),
            num_checkpoints=args.average_checkpoints,
            save_freq=args.checkpoint_every or "epoch",
        ),
        # Keeps the previous backup too: a kill while the backup is written falls back to it.
        keras.callbacks.BackupAndRestore(backup_dir, double_checkpoint=True),
    ]
    counter = CompilationCounter()
    if args.verbose:
        callbacks.append(counter)
    model.fit(
        train_data.repeat().skip(initial_epoch * steps_per_epoch),
        steps_per_epoch=steps_per_epoch,
        validation_data=val_data,
        epochs=args.epochs,
        callbacks=callbacks,
        shuffle=False,  # the dataset shuffles itself
        verbose=1 if sys.stdout.isatty() else 2,
    )
    training_seconds = time.time() - started
    for line, epoch in zip(counter.summary(), counter.epochs):
        print(f"{line}; {tokens_per_epoch / epoch['seconds']:,.0f} tokens/s")
    every = f"{args.checkpoint_every} updates" if args.checkpoint_every else "epoch"
    averaged = len(callbacks[1].checkpoints)
    print(
        f"trained in {training_seconds / 60:.1f} min; weights = average of the last "
        f"{averaged} checkpoint{'s' if averaged != 1 else ''} (one per {every})"
    )

    scores = {}
    for split, pairs in splits.items():
        sources = [source for source, _ in pairs]
        references = [target for _, target in pairs]
        hypotheses = translate(
            model,
            tokenizer,
            sources,
            beam_size=args.beam_size,
            length_penalty=args.length_penalty,
            progress=sys.stdout.isatty(),
        )
        scores[split] = bleu(hypotheses, references)
        print(
            f"{split}: sacreBLEU {scores[split]['bleu']:.2f} (cased, 13a), "
            f"{scores[split]['bleu_lowercase']:.2f} lowercased, {len(pairs)} sentences"
        )
        if split == "test_2016_flickr":
            samples = [
                {"source": source, "translation": hypothesis, "reference": reference}
                for source, hypothesis, reference in zip(sources, hypotheses, references)
            ][:5]
            for sample in samples:
                print("  EN  {source}\n  DE* {translation}\n  DE  {reference}".format(**sample))

    sample_source = splits["test_2016_flickr"][0][0]
    save_attention_picture(
        model, tokenizer, sample_source, os.path.join(args.output_dir, "cross_attention.png")
    )
    save_position_picture(os.path.join(args.output_dir, "position_table.png"))
    metadata = {
        "data_set": "Multi30k task 1 en-de (train; scored on val and test_2016_flickr)",
        "train_pairs": len(train_pairs),
        "scores": scores,
        "command": command,
        "training_minutes": round(training_seconds / 60, 1),
        "beam_size": args.beam_size,
        "length_penalty": args.length_penalty,
        "build_info": model.build_info,
        "samples": samples,
    }
    directory = save_pretrained(model, os.path.join(args.output_dir, "model"), tokenizer, metadata)
    print(f"saved model, tokenizer and scores to {directory}")
    print(
        f'  translate: python -m examples.translation.translate --model {directory} "A dog runs."'
    )
    if keras.backend.backend() == "tensorflow":
        serving = export_serving(
            model,
            tokenizer,
            os.path.join(args.output_dir, "serving"),
            beam_size=args.beam_size,
            length_penalty=args.length_penalty,
        )
        print(f"exported a string-to-string SavedModel (tf.saved_model.load) to {serving}")
    if args.marian:
        folder = save_huggingface(model, os.path.join(args.output_dir, "huggingface"), tokenizer)
        print(f"wrote a Hugging Face MarianMT folder (transformers, CTranslate2) to {folder}")
    print(f"total time {(time.time() - started) / 60:.1f} min")
    return scores


if __name__ == "__main__":
    main()
