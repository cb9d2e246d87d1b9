"""Train a Transformer sentiment classifier on SST-2 or IMDB, from scratch or fine-tuned.

From scratch, a SentencePiece vocabulary is learned on the training texts and a
`TransformerClassifier` trained on them; with `--init-from DIR` (a masked LM or ELECTRA
pretrainer saved by `examples.text_classification.pretrain`, or a classifier this
command saved, e.g. one trained on IMDB before SST-2) its tokenizer and encoder are
reused and fine-tuned with a new head (`TransformerClassifier.from_encoder`). A slice of
the training set is held out for early stopping (for SST-2, long phrases whose
overlapping phrases are dropped from training), so the reported set (SST-2 dev, IMDB
test) is looked at once, at the end. Prints accuracy and F1, saves the model, tokenizer
and scores with `save_pretrained` (`<output-dir>/model`, for
`examples.text_classification.predict`), a SavedModel with `export_serving`
(`<output-dir>/serving`: strings in, label and probabilities out), training curves and
an attention picture.

With `--mesh DATAxMODEL` it trains on a device mesh (docs/distribution.md): the batches
are split over the DATA replicas, so `--batch-size` must be a multiple of DATA, and a
smaller batch (a length bucket's leftover) is completed with copies of its own rows of
sample weight 0, which the loss (`reduction="mean_with_sample_weight"`), the accuracy (a
weighted metric) and the reported scores leave out. Under XLA (JAX) every batch is
completed that way to `--batch-size` rows and padded to one of a few lengths
(`make_classification_dataset(fixed_shapes=True)`), so the training and evaluation steps
compile a few times, not once per batch; `--verbose` prints the compilations per epoch.

Runs:
    python -m examples.text_classification.train --quick            # minutes, SST-2
    python -m examples.text_classification.train                    # SST-2, full
    python -m examples.text_classification.train --dataset imdb --data-dir DIR
    python -m examples.text_classification.train --init-from runs/pretrain/model
    KERAS_BACKEND=jax python -m examples.text_classification.train --quick --mesh 8
"""

import argparse
import contextlib
import json
import os
import sys
import time

import keras
import numpy as np

import keras_transformer as kt
from examples.command_line import is_huggingface_folder
from examples.compilations import CompilationCounter, batch_shapes
from examples.text_classification import data
from examples.text_classification.cli import (
    add_common_flags,
    add_mesh_flag,
    add_model_flags,
    check_compilation_cache,
    check_mesh,
    check_positive,
    check_rate,
    command_line,
    fill_defaults,
    model_overrides,
    prepare_devices,
    run_command,
    start_compilation_cache,
)
from examples.text_classification.evaluation import classify, scores_for
from examples.text_classification.schedule import WARMUP_FRACTION, fine_tuning_optimizer
from keras_transformer.models.device import choose_precision, detect_device

LABELS = data.LABELS
FULL_SST2 = dict(
    vocabulary_size=8000,
    preset="tiny",
    max_length=64,
    batch_size=64,
    epochs=8,
    learning_rate=1e-3,
    dropout=0.1,
    patience=2,
    train_limit=None,
    warmup_fraction=WARMUP_FRACTION,
)
FULL = {
    "sst2": FULL_SST2,
    # 48% of the reviews are longer than 256 pieces: 512 scored 87.6 against 86.6 on test
    # (the same pretrained encoder; RESULTS.md, tries).
    "imdb": dict(FULL_SST2, max_length=512, batch_size=32, epochs=4, learning_rate=5e-4),
}
# A published checkpoint (a Hugging Face folder) is fine-tuned as BERT was: batches of 32,
# a peak rate of 2e-5 to 5e-5 after a warmup over 10% of the steps, 2 to 4 epochs (Devlin et
# al., 2019, appendix A.3). The encoder keeps the checkpoint's dropout; the length is the
# task's, at most the checkpoint's position table.
PUBLISHED = dict(batch_size=32, epochs=2, learning_rate=5e-5, warmup_fraction=0.1, patience=2)
# LoRA trains far fewer weights from zero: the LoRA paper fine-tuned RoBERTa-base on SST-2
# at 5e-4 (Hu et al., 2021, table 9).
PUBLISHED_LORA = dict(PUBLISHED, learning_rate=5e-4)
# An encoder pretrained here (`pretrain`, or a classifier of this command) is small and
# briefly pretrained: it fine-tunes best at the from-scratch rate (RESULTS.md, tries).
TASK_LENGTH = {name: values["max_length"] for name, values in FULL.items()}
# A few minutes on 2 CPU cores: SST-2, from scratch, a 2-layer model, 2 epochs.
QUICK = dict(FULL_SST2, dataset="sst2", vocabulary_size=4000, epochs=2)
# Reported splits: SST-2's test labels are hidden (GLUE), so its dev set is reported.
EVAL_SPLIT = {"sst2": "dev", "imdb": "test"}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=["sst2", "imdb"], default=None)
    parser.add_argument("--quick", action="store_true", help="SST-2 from scratch in minutes")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="SST-2: defaults to the copy in the repository; IMDB: required, the layout of "
        "`python -m examples.text_classification.download_imdb`",
    )
    parser.add_argument(
        "--init-from",
        default=None,
        help="a masked LM or ELECTRA pretrainer saved by ...text_classification.pretrain, "
        "a classifier saved by this command, or a Hugging Face BERT folder (its encoder gets "
        "a new head)",
    )
    parser.add_argument(
        "--lora-rank",
        type=int,
        default=None,
        help="with --init-from: fine-tune LoRA adapters of this rank on the encoder's "
        "projections (and the new head) instead of every weight",
    )
    parser.add_argument("--output-dir", default=None, help="defaults to runs/<dataset>[-...]")
    parser.add_argument("--vocabulary-size", type=int, default=None)
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="ids per text, cut beyond (head and tail). Defaults: SST-2 64, IMDB 512; at most "
        "the pretrained encoder's learned positions",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="texts per step. Defaults: 64 (IMDB 32); from a Hugging Face folder 32",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="at most (early stopping). Defaults: 8 (IMDB 4); from a Hugging Face folder 2",
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=None,
        help="peak, after warmup. Defaults: from scratch or from an encoder pretrained here "
        "1e-3 (IMDB 5e-4); from a Hugging Face folder 5e-5, and 5e-4 with --lora-rank",
    )
    parser.add_argument(
        "--warmup-fraction",
        type=float,
        default=None,
        help="share of the steps over which the rate rises to its peak (then a cosine "
        "decay). Defaults: 0.06; 0.1 from a Hugging Face folder, as BERT",
    )
    parser.add_argument(
        "--dropout",
        type=float,
        default=None,
        help="defaults to 0.1; from a Hugging Face folder, the checkpoint's own rates",
    )
    parser.add_argument(
        "--pooling",
        choices=["mean", "cls", "pooler"],
        default="mean",
        help="pooler: the first state through a tanh dense layer, as BERT",
    )
    parser.add_argument(
        "--patience", type=int, default=None, help="epochs without a better val accuracy"
    )
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=0.05,
        help="share of the training set held out for early stopping (SST-2: at most 1,000 "
        "long phrases, and the training phrases overlapping them are dropped)",
    )
    parser.add_argument("--train-limit", type=int, default=None, help="use N training texts")
    parser.add_argument(
        "--eval-limit",
        type=int,
        default=None,
        help="score the first N texts of the reported split (IMDB's are shuffled by --seed)",
    )
    add_model_flags(parser)
    add_mesh_flag(parser)
    add_common_flags(parser)
    args = parser.parse_args(argv)
    if args.quick and args.dataset not in (None, "sst2"):
        parser.error("--quick runs on SST-2; leave out --dataset or pass --dataset sst2")
    args.dataset = args.dataset or "sst2"
    args.max_length_given = args.max_length is not None
    fill_defaults(args, defaults_for(args))
    for name in ("max_length", "batch_size", "epochs", "patience"):
        check_positive(parser, name, getattr(args, name))
    if args.vocabulary_size is not None:  # a pretrained encoder brings its tokenizer
        check_positive(parser, "vocabulary_size", args.vocabulary_size)
    for name in ("train_limit", "eval_limit"):
        if getattr(args, name) is not None:
            check_positive(parser, name, getattr(args, name))
    if args.max_length < 3:
        parser.error(
            f"--max-length must be at least 3 (start, one piece, end); got {args.max_length}"
        )
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be positive; got {args.learning_rate}")
    if not 0 <= args.warmup_fraction < 1:
        parser.error(f"--warmup-fraction must be in [0, 1); got {args.warmup_fraction}")
    if args.dropout is not None:
        check_rate(parser, "dropout", args.dropout)
    args.overrides = model_overrides(parser, args)
    args.mesh = check_mesh(parser, args.mesh)
    args.compilation_cache = check_compilation_cache(parser, args.compilation_cache)
    if args.mesh and args.batch_size % args.mesh[0]:
        data = args.mesh[0]
        parser.error(
            f"--batch-size {args.batch_size} must be a multiple of the mesh's {data} "
            f"data-parallel replicas (--mesh {args.mesh[0]}x{args.mesh[1]}), which split each "
            f"batch evenly; pass e.g. --batch-size {max(data, args.batch_size // data * data)}"
        )
    if not 0 < args.validation_fraction < 1:
        parser.error(f"--validation-fraction must be in (0, 1); got {args.validation_fraction}")
    if args.dataset == "imdb" and args.data_dir is None:
        parser.error(
            "--data-dir is required for IMDB (it is not shipped): a folder holding "
            "train.jsonl.gz and test.jsonl.gz, e.g. written by "
            "`python -m examples.text_classification.download_imdb --output-dir DIR`"
        )
    if args.lora_rank is not None:
        check_positive(parser, "lora_rank", args.lora_rank)
        if args.init_from is None:
            parser.error(
                "--lora-rank fine-tunes a pretrained encoder: pass --init-from (LoRA on a "
                "random encoder would train adapters on frozen noise)"
            )
    if args.init_from is not None and not os.path.isdir(args.init_from):
        parser.error(f"--init-from: no directory at '{args.init_from}'")
    if args.output_dir is None:
        suffix = "-quick" if args.quick else ("-finetuned" if args.init_from else "")
        suffix += f"-lora{args.lora_rank}" if args.lora_rank else ""
        args.output_dir = os.path.join("runs", args.dataset + suffix)
    return args


def defaults_for(args):
    """The values of the flags left out: the from-scratch recipe, or the fine-tuning one.

    A Hugging Face folder (a published checkpoint) gets BERT's fine-tuning recipe
    (`PUBLISHED`, `PUBLISHED_LORA` with `--lora-rank`) with the task's length; an
    encoder pretrained by these commands keeps the from-scratch values.
    """
    if args.init_from is not None and is_huggingface_folder(args.init_from):
        recipe = PUBLISHED_LORA if args.lora_rank else PUBLISHED
        return dict(recipe, max_length=TASK_LENGTH[args.dataset], train_limit=None)
    return QUICK if args.quick else FULL[args.dataset]


def describe_defaults(args):
    """Which recipe gave the defaults and the values it gave, in two lines."""
    if args.init_from is None or not is_huggingface_folder(args.init_from):
        return None
    return (
        f"BERT's fine-tuning recipe (each flag overrides): peak learning rate "
        f"{args.learning_rate:g},\n  warmup over {args.warmup_fraction:.0%} of the steps, "
        f"{args.epochs} epochs, batches of {args.batch_size}, at most {args.max_length} ids, "
        "the checkpoint's dropout"
    )


def load_texts(args):
    """The training, validation (held out of train) and reported splits, cleaned."""
    if args.dataset == "sst2":
        train = data.load_sst2("train", args.data_dir)
        reported = data.load_sst2(EVAL_SPLIT["sst2"], args.data_dir)
    else:
        train = data.load_imdb("train", args.data_dir, seed=args.seed)
        reported = data.load_imdb("test", args.data_dir, seed=args.seed)
        train = ([data.clean_imdb_text(t) for t in train[0]], train[1])
        reported = ([data.clean_imdb_text(t) for t in reported[0]], reported[1])
    if args.train_limit:
        train = (train[0][: args.train_limit], train[1][: args.train_limit])
    if args.eval_limit:
        reported = (reported[0][: args.eval_limit], reported[1][: args.eval_limit])
    if args.dataset == "sst2":
        # Random phrases would leave their own sub-phrases in training (see the function).
        count = min(1000, round(args.validation_fraction * len(train[0])))
        train, validation = data.sst2_sentence_holdout(*train, count=max(1, count), seed=args.seed)
    else:
        train, validation = data.train_validation_split(
            *train, validation_fraction=args.validation_fraction, seed=args.seed
        )
    return train, validation, reported


@contextlib.contextmanager
def distributed(mesh, config):
    """Variables created here take `mesh`'s layout, as `kt.models.build(mesh=...)` makes them.

    The mesh is checked against the devices and `config`'s heads first.
    """
    if mesh is None:
        yield
        return
    distribution = kt.distribution.make_distribution(mesh, config)
    if isinstance(distribution, keras.distribution.Distribution):
        # Global, as `build` sets it: `fit`, `evaluate` and `predict` split batches by it.
        keras.distribution.set_distribution(distribution)
        yield
    else:  # a tf.distribute.Strategy, which the model keeps
        with distribution.scope():
            yield


def make_model(args, tokenizer, pretrained):
    if pretrained is not None:
        precision, reason = args.precision, "requested"
        if precision == "auto":  # as `kt.models.build` chooses for a new model
            precision, reason = choose_precision(detect_device())
        # The checkpoint's dropout rates unless --dropout is given.
        dropout = {} if args.dropout is None else {"dropout": args.dropout}
        with distributed(args.mesh, pretrained.encoder_config()):
            model = kt.models.TransformerClassifier.from_encoder(
                pretrained,
                num_classes=len(LABELS),
                pooling=args.pooling,
                dtype=precision,
                **dropout,
            )
        print(
            f"model: encoder of '{args.init_from}', {model.count_params():,} parameters with "
            f"the new head\nprecision: {precision} ({reason})"
        )
        return model
    overrides = {**args.overrides, "pooling": args.pooling}
    model = kt.models.build(
        "classification",
        preset=args.preset,
        precision=args.precision,
        compile=False,
        vocabulary_size=tokenizer.vocabulary_size,
        num_classes=len(LABELS),
        mesh=args.mesh,
        **overrides,
    )
    return model


def strategy_scope(model):
    """The scope of `model`'s `tf.distribute` strategy (`--mesh` on TensorFlow), else none.

    Variables made after the model (the optimizer's, LoRA's) must be made in it for `fit`.
    """
    strategy = getattr(model, "distribute_strategy", None)  # TensorFlow's trainer only
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


def compile_classifier(model, learning_rate, total_steps, warmup_fraction=WARMUP_FRACTION):
    """Compiles `model` for batches that may hold rows of sample weight 0 (see `--mesh`).

    The loss is the mean over the rows' weights and the accuracy a weighted metric, so
    the rows completing a batch for a mesh count for nothing; without sample weights both
    are the usual means. Keras gives sample weights to `weighted_metrics` only: under
    `metrics` the accuracy would count those rows too.

    On TensorFlow the optimizer's variables are made in the scope of the model's
    `tf.distribute` strategy (`--mesh`), as `fit` requires.
    """
    with strategy_scope(model):
        model.compile(
            optimizer=fine_tuning_optimizer(
                learning_rate, total_steps=total_steps, warmup_fraction=warmup_fraction
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight"
            ),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )


def load_pretrained_encoder(path):
    from keras_transformer.saving import load_huggingface, load_pretrained

    bundle = load_huggingface(path) if is_huggingface_folder(path) else load_pretrained(path)
    encoders = (kt.models.MaskedLM, kt.models.ElectraPretrainer, kt.models.TransformerClassifier)
    if not isinstance(bundle.model, encoders):
        raise ValueError(
            f"--init-from '{path}' holds a {type(bundle.model).__name__}, not a masked LM, an "
            "ELECTRA pretrainer or a classifier; pass the model/ folder written by "
            "`python -m examples.text_classification.pretrain` or `...train`, or a Hugging "
            "Face BERT folder."
        )
    if bundle.tokenizer is None:
        raise ValueError(f"--init-from '{path}' holds no tokenizer; save it with one.")
    return bundle


def fit_length_to_positions(args, pretrained):
    """Caps the default `--max-length` at `pretrained`'s learned positions; a longer one given
    is refused, naming both.
    """
    if pretrained.position != "learned" or args.max_length <= pretrained.max_sequence_length:
        return
    table = pretrained.max_sequence_length
    if args.max_length_given:
        raise ValueError(
            f"--max-length {args.max_length} exceeds the {table} positions the encoder of "
            f"'{args.init_from}' learned; pass --max-length {table} or less."
        )
    args.max_length = table


def print_batch_shapes(fixed_shapes, batch_size, max_length, train_shapes, val_shapes):
    """One line: how many batch shapes training and validation bring, and the bound."""
    from keras_transformer.text import classification_batch_shapes

    seen = f"{len(train_shapes)} in training, {len(val_shapes)} in validation"
    if not fixed_shapes:
        print(f"batch shapes: as the data come ({seen}; no XLA, nothing compiles per shape)")
        return
    lengths = [length for _, length in classification_batch_shapes(batch_size, max_length)]
    listed = ", ".join(str(length) for length in lengths)
    print(
        f"batch shapes: fixed under XLA, at most {len(lengths)} ({batch_size} texts of "
        f"{listed} tokens); {seen}"
    )


def main(argv=None):
    return run_command(parse_args, run, argv)


def run(args, argv):
    import tensorflow as tf

    from keras_transformer.saving import export_serving, save_pretrained
    from keras_transformer.text import SubwordTokenizer, make_classification_dataset

    command = command_line("train", argv)
    prepare_devices(args.mesh)  # before the backend runs anything
    start_compilation_cache(args.compilation_cache)
    keras.utils.set_random_seed(args.seed)
    started = time.time()
    (train_texts, train_labels), validation, reported = load_texts(args)
    print(
        f"data: {args.dataset}, {len(train_texts)} training texts, {len(validation[0])} held "
        f"out for early stopping, {len(reported[0])} in {EVAL_SPLIT[args.dataset]}"
    )

    pretrained = None
    if args.init_from:
        bundle = load_pretrained_encoder(args.init_from)
        tokenizer, pretrained = bundle.tokenizer, bundle.model
        print(f"tokenizer: the pretrained one, {tokenizer.vocabulary_size} pieces")
        fit_length_to_positions(args, pretrained)
        if describe_defaults(args):
            print(f"defaults: {describe_defaults(args)}")
    else:
        tokenizer = SubwordTokenizer.train(
            train_texts, vocabulary_size=args.vocabulary_size, mask_token=True
        )
        print(
            f"tokenizer: SentencePiece BPE on the training texts, "
            f"{tokenizer.vocabulary_size} pieces"
        )
    # With --mesh, the mesh is checked against the devices and heads here, before anything
    # is written.
    model = make_model(args, tokenizer, pretrained)
    if args.lora_rank:
        with strategy_scope(model):
            model.enable_lora(args.lora_rank)
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    print(f"trainable parameters: {trainable:,} of {model.count_params():,}")
    # The data-parallel replicas split every batch evenly: partial batches are completed
    # with rows of sample weight 0.
    batch_size_multiple = args.mesh[0] if args.mesh else 1
    # XLA compiles per shape (`compile`'s "auto" resolves it as `model.jit_compile` does);
    # the plain TensorFlow runtime is faster on unpadded batches.
    fixed_shapes = bool(model.jit_compile)

    def dataset(texts, labels, training):
        return make_classification_dataset(
            texts,
            labels,
            tokenizer,
            batch_size=args.batch_size,
            max_length=args.max_length,
            num_classes=len(LABELS),
            shuffle=training,
            seed=args.seed,
            batch_size_multiple=batch_size_multiple,
            fixed_shapes=fixed_shapes,
        )

    # Counting the batches once tells Keras the epoch's length: its progress bar gets a
    # total, and it no longer takes the end of the first epoch for running out of data.
    train_data = dataset(train_texts, train_labels, training=True)
    train_shapes = batch_shapes(train_data)
    steps_per_epoch = sum(train_shapes.values())
    train_data = train_data.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))
    val_data = dataset(*validation, training=False)
    val_shapes = batch_shapes(val_data)
    val_data = val_data.apply(tf.data.experimental.assert_cardinality(sum(val_shapes.values())))
    print_batch_shapes(fixed_shapes, args.batch_size, args.max_length, train_shapes, val_shapes)
    compile_classifier(
        model,
        args.learning_rate,
        total_steps=steps_per_epoch * args.epochs,
        warmup_fraction=args.warmup_fraction,
    )
    os.makedirs(args.output_dir, exist_ok=True)
    callbacks = [
        # The previous backup too: a run killed while the backup is written falls back to it.
        keras.callbacks.BackupAndRestore(
            os.path.join(args.output_dir, "backup"), double_checkpoint=True
        ),
        keras.callbacks.EarlyStopping(
            monitor="val_accuracy", patience=args.patience, restore_best_weights=True
        ),
    ]
    counter = CompilationCounter()
    if args.verbose:
        callbacks.append(counter)
    history = model.fit(
        train_data,
        validation_data=val_data,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=1 if sys.stdout.isatty() else 2,
        shuffle=False,  # the dataset shuffles itself; Keras cannot shuffle a tf.data.Dataset
    )
    training_seconds = time.time() - started
    for line in counter.summary():
        print(line)
    if args.lora_rank:
        model = model.merge_lora()  # the deltas in the kernels: a plain model to score and save

    reported_data = dataset(*reported, training=False)
    predictions, labels, _ = classify(model, reported_data)
    scores = {EVAL_SPLIT[args.dataset]: scores_for(predictions, labels)}
    val_predictions, val_labels, _ = classify(model, val_data)
    scores["validation"] = scores_for(val_predictions, val_labels)
    for split, values in scores.items():
        print(
            f"{split}: accuracy {values['accuracy']:.4f}, F1 {values['f1']:.4f} "
            f"({values['count']} texts)"
        )
    print(f"trained in {training_seconds / 60:.1f} min ({len(history.epoch)} epochs)")

    from examples.text_classification.pictures import (
        save_attention_picture,
        save_training_curves,
    )

    save_training_curves(history.history, os.path.join(args.output_dir, "training_curves.png"))
    sample = min(reported[0][:50], key=len) if args.dataset == "imdb" else reported[0][0]
    save_attention_picture(
        model, tokenizer, sample, os.path.join(args.output_dir, "attention.png"), args.max_length
    )
    metadata = {
        "task": "classification",
        "labels": list(LABELS),
        "max_length": args.max_length,
        "data_set": args.dataset,
        "train_texts": len(train_texts),
        "reported_texts": len(reported[0]),
        "scores": scores,
        "epochs_run": len(history.epoch),
        "lora_rank": args.lora_rank,
        "trainable_parameters": trainable,
        "history": {k: [round(float(v), 5) for v in vs] for k, vs in history.history.items()},
        "init_from": args.init_from,
        "mesh": kt.distribution.format_mesh(args.mesh) if args.mesh else None,
        "command": command,
        "training_minutes": round(training_seconds / 60, 1),
    }
    directory = save_pretrained(model, os.path.join(args.output_dir, "model"), tokenizer, metadata)
    print(f"saved model, tokenizer and scores to {directory}")
    print(
        "  predict: python -m examples.text_classification.predict "
        f'--model {directory} "a gorgeous, witty film"'
    )
    if keras.backend.backend() == "tensorflow":
        serving = export_serving(
            model, tokenizer, os.path.join(args.output_dir, "serving"), max_length=args.max_length
        )
        print(f"exported a SavedModel (strings in, label and probabilities out) to {serving}")
    print(f"total time {(time.time() - started) / 60:.1f} min")
    print(json.dumps({"scores": scores}))
    return scores


if __name__ == "__main__":
    main()
