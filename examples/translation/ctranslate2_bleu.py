"""Translate Multi30k with CTranslate2 from a MarianMT folder, and score it as `train` does.

The folder is one that `train --marian` (or `--init-from`) wrote with `save_huggingface`
(`<output-dir>/huggingface`), or any MarianMT checkpoint folder. CTranslate2's converter
reads it; the sentences are split into pieces by the folder's tokenizer, translated by
CTranslate2 and scored with sacreBLEU (13a), next to our own translations of the same
sentences with the same search when `--compare` is given. With `--compute-type int8`
both run with 8-bit weights: CTranslate2's `int8` and ours after `model.quantize("int8")`.

Runs:
    pip install ctranslate2 transformers
    python -m examples.translation.ctranslate2_bleu --model runs/multi30k-marian/huggingface \\
        --beam-size 1 --compare
"""

import argparse
import os
import tempfile
import time

from examples.command_line import add_debug_flags, check_positive, run_command
from examples.translation.data import DEFAULT_DATA_DIR


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m examples.translation.ctranslate2_bleu",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--model", required=True, help="a MarianMT folder (config.json, ...)")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="folder of Multi30k files")
    parser.add_argument("--split", default="test_2016_flickr", help="the Multi30k split to score")
    parser.add_argument("--beam-size", type=int, default=1, help="1: greedy search")
    parser.add_argument("--max-length", type=int, default=128, help="most generated tokens")
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2's CPU threads")
    parser.add_argument(
        "--compare", action="store_true", help="also translate with our model (same search)"
    )
    parser.add_argument(
        "--compute-type",
        choices=("float32", "int8"),
        default="float32",
        help="the weights' precision on both sides (int8: ours after model.quantize('int8'))",
    )
    add_debug_flags(parser)
    args = parser.parse_args(argv)
    for name in ("beam_size", "max_length", "threads"):
        check_positive(parser, name, getattr(args, name))
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        parser.error(f"--model '{args.model}' has no config.json: pass a MarianMT folder")
    if not os.path.isdir(args.data_dir):
        parser.error(f"--data-dir '{args.data_dir}' is not a directory")
    return args


def run(args, argv):
    import ctranslate2
    import numpy as np
    import sacrebleu
    from ctranslate2.converters import TransformersConverter

    from examples.translation.data import load_multi30k
    from keras_transformer.saving import load_huggingface

    pairs = load_multi30k(args.split, args.data_dir)
    sources = [source for source, _ in pairs]
    references = [target for _, target in pairs]
    bundle = load_huggingface(args.model)
    tokenizer = bundle.tokenizer
    with tempfile.TemporaryDirectory() as converted:
        TransformersConverter(args.model).convert(converted, force=True)
        translator = ctranslate2.Translator(
            converted,
            device="cpu",
            compute_type=args.compute_type,
            inter_threads=1,
            intra_threads=args.threads,
        )
        ids = [row + [tokenizer.end_id] for row in tokenizer.tokenize(sources).to_list()]
        pieces = [[p.decode("utf-8") for p in tokenizer.id_to_piece(row).numpy()] for row in ids]
        started = time.time()
        results = translator.translate_batch(
            pieces,
            beam_size=args.beam_size,
            # Scores as ours with `length_penalty=0`: the sum of the log-probabilities.
            length_penalty=0.0,
            max_decoding_length=args.max_length,
            max_batch_size=64,
        )
        seconds = time.time() - started
    vocabulary = {piece: index for index, piece in enumerate(_pieces(tokenizer))}
    hypotheses = [
        tokenizer.decode([vocabulary[p] for p in result.hypotheses[0]]) for result in results
    ]
    score = sacrebleu.corpus_bleu(hypotheses, [references]).score
    print(
        f"CTranslate2 {ctranslate2.__version__}: sacreBLEU {score:.2f} on {args.split} "
        f"({len(pairs)} sentences, beam {args.beam_size}, {args.compute_type}, {seconds:.1f} s)"
    )
    scores = {"ctranslate2": round(score, 2)}
    if args.compare:
        from examples.translation.translator import translate

        if args.compute_type == "int8":
            bundle.model.quantize("int8")
        started = time.time()
        ours = translate(
            bundle.model, tokenizer, sources, beam_size=args.beam_size, length_penalty=0.0
        )
        seconds = time.time() - started
        ours_score = sacrebleu.corpus_bleu(ours, [references]).score
        same = int(np.sum([a == b for a, b in zip(ours, hypotheses)]))
        print(
            f"keras_transformer: sacreBLEU {ours_score:.2f} ({seconds:.1f} s); "
            f"{same} of {len(pairs)} translations identical to CTranslate2's"
        )
        scores["keras_transformer"] = round(ours_score, 2)
    return scores


def _pieces(tokenizer):
    import tensorflow as tf

    return [
        p.decode("utf-8")
        for p in tokenizer.id_to_piece(tf.range(tokenizer.vocabulary_size)).numpy()
    ]


def main(argv=None):
    return run_command(parse_args, run, argv)


if __name__ == "__main__":
    main()
