"""Translate English sentences with a model saved by `examples.translation.train`.

Runs:
    python -m examples.translation.translate --model runs/multi30k-quick/model "A man rides a bike."
    echo "Two dogs play in the snow." | python -m examples.translation.translate --model DIR

Prints one German translation per line, in the order of the sentences (given as
arguments, or one per line on standard input when none are given). An empty line
translates to an empty line, as in the SavedModel of `export_serving`.
"""

import argparse
import sys

from examples.command_line import (
    add_debug_flags,
    check_non_negative_number,
    check_positive,
    load_saved_model,
    run_command,
)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m examples.translation.translate", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--model",
        required=True,
        help="the model/ folder written by train, or a Hugging Face MarianMT folder",
    )
    parser.add_argument("sentences", nargs="*", help="English sentences (default: stdin lines)")
    parser.add_argument(
        "--beam-size",
        type=int,
        default=None,
        help="1: greedy search; defaults to the beam the model was scored with",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help="GNMT alpha; defaults to the one the model was scored with",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    add_debug_flags(parser)
    args = parser.parse_args(argv)
    if args.beam_size is not None:
        check_positive(parser, "beam_size", args.beam_size)
    if args.length_penalty is not None:
        check_non_negative_number(parser, "length_penalty", args.length_penalty)
    check_positive(parser, "batch_size", args.batch_size)
    return args


def load_translator(path):
    # Imported once the arguments are known to be good: TensorFlow takes seconds to load,
    # and a wrong flag fails at once.
    from keras_transformer.models import Seq2SeqTransformer

    return load_saved_model(
        path, Seq2SeqTransformer, "translation model", "examples.translation.train"
    )


def run(args, argv):
    from examples.translation.translator import translate

    sentences = args.sentences or sys.stdin.read().splitlines()
    if not sentences:
        raise ValueError("no sentence to translate: give sentences as arguments or on stdin")
    bundle = load_translator(args.model)
    metadata = bundle.metadata
    beam_size = args.beam_size or metadata.get("beam_size", 4)
    length_penalty = args.length_penalty
    if length_penalty is None:
        length_penalty = metadata.get("length_penalty", 0.6)
    translations = translate(
        bundle.model,
        bundle.tokenizer,
        sentences,
        batch_size=args.batch_size,
        beam_size=beam_size,
        length_penalty=length_penalty,
    )
    for translation in translations:
        print(translation)
    return translations


def main(argv=None):
    """Runs the command; a user error ends it with one line on stderr (exit status 2)."""
    return run_command(parse_args, run, argv)


if __name__ == "__main__":
    main()
