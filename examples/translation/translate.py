"""Translate English sentences with a model saved by `examples.translation.train`.

Runs:
    python -m examples.translation.translate --model runs/multi30k/model "A man rides a bike."
    echo "Two dogs play in the snow." | python -m examples.translation.translate --model DIR

Prints one German translation per line, in the order of the sentences (given as
arguments, or one per line on standard input when none are given).
"""

import argparse
import sys

from examples.translation.translator import translate
from keras_transformer.saving import PretrainedDirectoryError, load_pretrained


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="directory written by save_pretrained")
    parser.add_argument("sentences", nargs="*", help="English sentences (default: stdin lines)")
    parser.add_argument(
        "--beam-size", type=int, default=None, help="defaults to the beam the model was scored with"
    )
    parser.add_argument("--length-penalty", type=float, default=None)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sentences = args.sentences or [line.strip() for line in sys.stdin if line.strip()]
    try:
        bundle = load_pretrained(args.model)
    except PretrainedDirectoryError as error:
        sys.exit(f"error: {error}")
    if bundle.tokenizer is None:
        sys.exit(f"error: '{args.model}' holds no tokenizer; save it with one to translate text.")
    metadata = bundle.metadata
    beam_size = args.beam_size or metadata.get("beam_size", 4)
    length_penalty = args.length_penalty
    if length_penalty is None:
        length_penalty = metadata.get("length_penalty", 0.6)
    translations = translate(
        bundle.model,
        bundle.tokenizer,
        sentences,
        beam_size=beam_size,
        length_penalty=length_penalty,
    )
    for translation in translations:
        print(translation)
    return translations


if __name__ == "__main__":
    main()
