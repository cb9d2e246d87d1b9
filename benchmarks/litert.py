"""A trained classifier as LiteRT files: size, SST-2 dev accuracy and latency, float32 and int8.

Takes the `save_pretrained` folder of a classifier trained by `python -m
examples.text_classification.train` (on SST-2), exports it with
``model.export(path, format="litert")`` on LiteRT's builtin operators only (no Flex
delegate), in float32 and with dynamic-range int8 weights (``optimizations=[DEFAULT]``:
weights stored as int8, activations float), and reports for each file and for the Keras
model itself:

* ``file MB``: the ``.tflite`` file (for Keras: the float32 weights as ``.weights.h5``);
* ``dev accuracy``: on SST-2 dev (872 sentences, read with the example's loader), each
  sentence tokenized with the saved tokenizer as `predict` does and run alone (batch 1,
  its own length);
* ``ms / sentence``: the median time of one sentence through the model, over the dev set
  after one untimed pass (the LiteRT interpreter with ``--threads`` threads; Keras: one
  eager call, for reference only).

Run from the repository root with the TensorFlow backend::

    python -m examples.text_classification.train --quick
    python benchmarks/litert.py --model runs/sst2-quick/model
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
from quantization import cpu_name, versions
from results import append_section, markdown_table

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="a classifier's save_pretrained folder")
    parser.add_argument("--data-dir", default=None, help="SST-2 folder (default: the example's)")
    parser.add_argument("--sentences", type=int, default=None, help="dev sentences (default all)")
    parser.add_argument("--threads", type=int, default=1, help="LiteRT interpreter threads")
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "RESULTS.md"),
        help="Markdown file the table is appended to ('' to print only)",
    )
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        parser.error(f"--model {args.model!r} is not a save_pretrained folder (no config.json)")
    if args.threads < 1:
        parser.error(f"--threads must be a positive integer; got {args.threads}")
    return args


def float32_copy(model):
    """An uncompiled float32 copy: the example may train in mixed precision."""
    copy = type(model).from_config(dict(model.get_config(), dtype="float32"))
    copy.set_weights(model.get_weights())
    return copy


def export_litert(model, path, int8):
    import tensorflow as tf

    options = {"target_spec": {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]}}
    if int8:
        options["optimizations"] = [tf.lite.Optimize.DEFAULT]
    model.export(path, format="litert", verbose=False, **options)


def litert_runner(path, threads):
    """`run(ids) -> logits` on LiteRT's builtin-operator interpreter (no Flex delegate)."""
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(
        path,
        num_threads=threads,
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN,
    )
    runner = interpreter.get_signature_runner()
    (name,) = runner.get_input_details()

    def run(ids):
        return next(iter(runner(**{name: ids}).values()))

    return run


def evaluate(run, sentences, labels):
    """Accuracy and the median milliseconds per sentence (after an untimed pass)."""
    for ids in sentences[:8]:
        run(ids)
    correct, times = 0, []
    for ids, label in zip(sentences, labels):
        started = time.perf_counter()
        logits = np.asarray(run(ids))
        times.append(time.perf_counter() - started)
        correct += int(np.argmax(logits[0]) == label)
    return correct / len(labels), 1000 * statistics.median(times)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # TensorFlow points to the `ai_edge_litert` package, the same interpreter, at every load.
    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    sys.path.insert(0, os.path.dirname(HERE))
    from examples.text_classification.data import load_sst2
    from keras_transformer.saving import load_pretrained
    from keras_transformer.text import tokenize_for_classification

    backend, found = versions()
    if backend != "tensorflow":
        raise SystemExit("LiteRT files are written on TensorFlow: unset KERAS_BACKEND")
    bundle = load_pretrained(args.model)
    model = float32_copy(bundle.model)
    texts, labels = load_sst2("dev", args.data_dir)
    texts, labels = texts[: args.sentences], labels[: args.sentences]
    ragged = tokenize_for_classification(
        bundle.tokenizer, texts, max_length=bundle.metadata.get("max_length")
    )
    sentences = [np.asarray([row], "int32") for row in ragged.to_list()]

    rows = []
    keras_accuracy, keras_ms = evaluate(lambda ids: model(ids, training=False), sentences, labels)
    with tempfile.TemporaryDirectory() as directory:
        # Not the saved file, which may hold the optimizer's state too.
        weights = os.path.join(directory, "model.weights.h5")
        model.save_weights(weights)
        rows.append(("Keras, float32", os.path.getsize(weights), keras_accuracy, keras_ms))
        for name, int8 in (("LiteRT, float32", False), ("LiteRT, int8 weights", True)):
            path = os.path.join(directory, "model.tflite")
            export_litert(model, path, int8)
            accuracy, ms = evaluate(litert_runner(path, args.threads), sentences, labels)
            rows.append((name, os.path.getsize(path), accuracy, ms))

    table = markdown_table(
        ["model", "file MB", "dev accuracy", "ms / sentence"],
        [
            [name, f"{size / 1e6:.2f}", f"{100 * accuracy:.2f}", f"{ms:.2f}"]
            for name, size, accuracy, ms in rows
        ],
    )
    print(table)
    if args.output:
        notes = [
            f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); LiteRT threads: {args.threads}",
            f"model: `{args.model}` ({model.count_params():,} parameters); "
            f"{len(labels)} SST-2 dev sentences, one at a time",
        ]
        append_section(
            args.output, "LiteRT export of the SST-2 classifier", "benchmarks/litert.py",
            backend, found, notes, table,
        )  # fmt: skip
        print(f"appended to {args.output}")


if __name__ == "__main__":
    main()
