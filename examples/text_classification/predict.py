"""Classify texts with a model saved by `examples.text_classification.train`.

Runs:
    python -m examples.text_classification.predict --model runs/sst2-quick/model "a witty film"
    python -m examples.text_classification.predict --model runs/sst2-quick/serving "a witty film"
    python -m examples.text_classification.predict --model DIR --file reviews.txt
    echo "a dull, lifeless mess" | python -m examples.text_classification.predict --model D

Prints one line per text, in order: the label, its probability and the text,
separated by tabs. Texts come from the arguments, else from `--file` (one per
line; `-` is standard input), else from standard input. `--model` takes the `model/`
folder (Keras, any backend) or the `serving/` SavedModel (TensorFlow ops only: the
tokenizer and the model in one graph, as a server runs it).
"""

import argparse
import os
import sys

from examples.command_line import add_debug_flags, fail, load_saved_model
from examples.text_classification.data import LABELS


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        required=True,
        help="the model/ folder written by train, or its serving/ SavedModel",
    )
    parser.add_argument("texts", nargs="*", help="texts to classify (default: --file or stdin)")
    parser.add_argument("--file", default=None, help="one text per line; - for stdin")
    parser.add_argument("--batch-size", type=int, default=64)
    add_debug_flags(parser)
    args = parser.parse_args(argv)
    if args.texts and args.file:
        parser.error("give texts as arguments or --file, not both")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be a positive integer; got {args.batch_size}")
    return args


def read_texts(args):
    if args.texts:
        texts = args.texts
        source = "the arguments"
    elif args.file not in (None, "-"):
        if not os.path.isfile(args.file):
            raise ValueError(f"--file '{args.file}' does not exist")
        with open(args.file, encoding="utf-8") as file:
            texts = file.read().splitlines()
        source = f"'{args.file}'"
    else:
        texts = sys.stdin.read().splitlines()
        source = "standard input"
    texts = [text.strip() for text in texts if text.strip()]
    if not texts:
        raise ValueError(f"no text to classify in {source}: give one text per line")
    return texts


def load_classifier(path):
    from keras_transformer.models import TransformerClassifier

    return load_saved_model(
        path, TransformerClassifier, "classifier", "examples.text_classification.train"
    )


def predict(bundle, texts, batch_size=64):
    """`[(label name, probability), ...]` for `texts`, in order."""
    import numpy as np
    from keras import ops

    from keras_transformer.text import tokenize_for_classification

    labels = bundle.metadata.get("labels") or [str(i) for i in range(bundle.model.num_classes)]
    max_length = bundle.metadata.get("max_length")
    results = []
    for start in range(0, len(texts), batch_size):
        ids = tokenize_for_classification(
            bundle.tokenizer, texts[start : start + batch_size], max_length=max_length
        ).to_tensor(default_value=bundle.model.pad_id)
        logits = bundle.model(np.asarray(ids, "int32"), training=False)
        probabilities = ops.convert_to_numpy(ops.softmax(logits, axis=-1))
        for row in probabilities:
            best = int(row.argmax())
            results.append((labels[best], float(row[best])))
    return results


def is_saved_model(path):
    return os.path.isfile(os.path.join(path, "saved_model.pb"))


def predict_served(path, texts, batch_size=64, labels=LABELS):
    """`predict` with the SavedModel `export_serving` wrote: strings in, in TensorFlow alone."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizers' ops

    served = tf.saved_model.load(path)
    if not hasattr(served, "serve"):
        raise ValueError(f"'{path}' is a SavedModel without the `serve` of `export_serving`")
    results = []
    for start in range(0, len(texts), batch_size):
        outputs = served.serve(tf.constant(texts[start : start + batch_size]))
        if "label" not in outputs:
            raise ValueError(
                f"'{path}' is not a classifier's SavedModel: it returns {sorted(outputs)}"
            )
        for label, row in zip(outputs["label"].numpy(), outputs["probabilities"].numpy()):
            results.append((labels[int(label)], float(row[label])))
    return results


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        texts = read_texts(args)
        if is_saved_model(args.model):
            results = predict_served(args.model, texts, args.batch_size)
        else:
            results = predict(load_classifier(args.model), texts, args.batch_size)
    except (ValueError, OSError) as error:
        fail(error, args.debug)
    for text, (label, probability) in zip(texts, results):
        print(f"{label}\t{probability:.4f}\t{text}")
    return results


if __name__ == "__main__":
    main()
