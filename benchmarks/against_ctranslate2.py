"""Decoding speed against CTranslate2 on the same weights: float32 and int8, greedy and beam 4.

A MarianMT folder (one that `save_huggingface` wrote, e.g. `examples.translation.train
--marian`'s `<run>/huggingface`) is read twice: by `load_huggingface` (ours) and by
CTranslate2's converter (the same weights in its format). Four decoders translate the same
source sentences (the first ``--sentences`` of Multi30k's test_2016_flickr, split by the
folder's tokenizer, outside the timed passes on both sides; ours batched in order of length,
as CTranslate2 batches them):

* ``ours f32``: `Seq2SeqTransformer.generate` (compiled: XLA on TensorFlow);
* ``ours int8``: the same after `model.quantize("int8")`;
* ``CT2 f32``, ``CT2 int8``: `ctranslate2.Translator(compute_type="float32" | "int8")`
  with ``--threads`` intra-op threads (the machine's cores by default).

Both stop at the end token, search without a length penalty and generate at most
``--max-length`` tokens. Each cell (batch size x search) times ``--rounds`` passes over the
sentences for each decoder, the decoders alternating within a round after an untimed pass
(tracing, compiling, loading). `sentences/s` is the sentences over a pass's seconds (the
two may return hypotheses of different lengths, so tokens/s would compare different work);
`tokens/s` counts the output tokens of the best hypotheses, end token included. The ratio is
ours' sentences/s over CTranslate2's at the same precision (> 1: ours is faster), the median
of the rounds' ratios.

With ``--base-shape``, the folder gives only its tokenizer and vocabulary size: the weights
are random ones of the paper's base shape (6 + 6 layers, d 512, 8 heads, d_ff 2048), made by
transformers' `MarianMTModel` (seed 0) in a temporary folder. Random weights seldom pick the
end token, so hypotheses run to ``--max-length``: the cost of decoding at full width, not of
translating well.

(The file is not named `ctranslate2.py`: run as a script, that name would hide the
`ctranslate2` package.)

Run from the repository root::

    python benchmarks/against_ctranslate2.py --model runs/marian-finetuned/huggingface
    python benchmarks/against_ctranslate2.py --model runs/marian-finetuned/huggingface \
        --base-shape --sentences 64 --max-length 32
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

from machine import load_average
from results import append_run, markdown_table

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a MarianMT folder")
    parser.add_argument("--sentences", type=int, default=256, help="test sentences per pass")
    parser.add_argument("--batch", default="1,32", help="comma-separated batch sizes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=64, help="most generated tokens")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--label", default="", help="what the model is, for the report")
    parser.add_argument(
        "--base-shape",
        action="store_true",
        help="random weights of the paper's base shape, with --model's tokenizer",
    )
    parser.add_argument("--no-record", action="store_true", help="print, do not append")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        parser.error(f"--model {args.model!r} is not a MarianMT folder (no config.json in it)")
    args.batch = [int(size) for size in args.batch.split(",")]
    return args


BASE_SHAPE = {
    "d_model": 512,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "encoder_attention_heads": 8,
    "decoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048,
}


def base_shape_folder(folder, copy):
    """Writes to `copy` the MarianMT `folder` with random weights of the paper's base shape."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    with open(os.path.join(folder, "config.json")) as file:
        config = json.load(file)
    for key in ("architectures", "model_type", "dtype", "torch_dtype", "transformers_version"):
        config.pop(key, None)
    config.update(BASE_SHAPE)
    torch.manual_seed(0)
    model = MarianMTModel(MarianConfig(**config)).eval()
    model.save_pretrained(copy, safe_serialization=True)
    for name in os.listdir(folder):
        if name not in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(folder, name), copy)


def main(argv=None):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        return measure(args, scratch)


def measure(args, scratch):
    """Runs the benchmark; `scratch` is a folder for the converted and generated models."""
    sys.path.insert(0, REPOSITORY)
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    from examples.translation.data import load_multi30k
    from examples.translation.translator import source_ids
    from keras_transformer.saving import load_huggingface

    warnings.simplefilter("ignore")
    started, load_at_start = time.time(), load_average()
    model_name = args.label or args.model
    folder = args.model
    if args.base_shape:
        folder = os.path.join(scratch, "base_shape")
        base_shape_folder(args.model, folder)
        model_name += ", random weights of the base shape (6 + 6 layers, d 512, d_ff 2048)"
    bundle = load_huggingface(folder)
    tokenizer = bundle.tokenizer
    ours = {"f32": bundle.model, "int8": load_huggingface(folder).model}
    ours["int8"].quantize("int8")
    sentences = [s for s, _ in load_multi30k("test_2016_flickr")][: args.sentences]
    ids = [row + [tokenizer.end_id] for row in tokenizer.tokenize(sentences).to_list()]
    pieces = [[p.decode("utf-8") for p in tokenizer.id_to_piece(row).numpy()] for row in ids]
    converted = os.path.join(scratch, "ctranslate2")
    TransformersConverter(folder).convert(converted, force=True)
    translators = {
        precision: ctranslate2.Translator(
            converted, device="cpu", compute_type=compute, intra_threads=args.threads
        )
        for precision, compute in (("f32", "float32"), ("int8", "int8"))
    }

    # Both sides get the sentences split into pieces beforehand: CTranslate2 as pieces,
    # ours as padded id matrices (every batch with `batch` rows, the last one filled up:
    # one compiled program). CTranslate2 sorts its inputs by length before it splits them
    # into batches of `max_batch_size`; ours are batched in the same order.
    by_length = [sentences[i] for i in sorted(range(len(ids)), key=lambda i: len(ids[i]))]
    batches = {
        batch: [
            (source_ids(tokenizer, by_length[start : start + batch], rows=batch), rows)
            for start in range(0, len(by_length), batch)
            for rows in [len(by_length[start : start + batch])]
        ]
        for batch in args.batch
    }

    def ours_pass(model, batch, beam):
        tokens = 0
        method = "greedy" if beam == 1 else "beam"
        extra = {} if beam == 1 else {"beam_size": beam, "length_penalty": 0.0}
        for source, rows in batches[batch]:
            output = model.generate(source, max_length=args.max_length, method=method, **extra)
            for row in output[:rows].tolist():
                tokens += row.index(tokenizer.end_id) + 1 if tokenizer.end_id in row else len(row)
        return tokens

    def ct2_pass(translator, batch, beam):
        results = translator.translate_batch(
            pieces,
            beam_size=beam,
            length_penalty=0.0,
            max_decoding_length=args.max_length,
            max_batch_size=batch,
        )
        return sum(len(r.hypotheses[0]) + 1 for r in results)  # + the end token

    rows = []
    for batch in args.batch:
        for beam in (1, 4):
            contenders = {}
            for precision in ("f32", "int8"):
                contenders[f"ours {precision}"] = (ours_pass, ours[precision])
                contenders[f"CT2 {precision}"] = (ct2_pass, translators[precision])
            rates = {name: [] for name in contenders}
            token_rates = {name: [] for name in contenders}
            for run, engine in contenders.values():
                run(engine, batch, beam)  # untimed: tracing, compiling
            for _ in range(args.rounds):
                for name, (run, engine) in contenders.items():
                    begin = time.perf_counter()
                    tokens = run(engine, batch, beam)
                    seconds = time.perf_counter() - begin
                    rates[name].append(len(sentences) / seconds)
                    token_rates[name].append(tokens / seconds)
            search = "greedy" if beam == 1 else "beam 4"
            for precision in ("f32", "int8"):
                mine, theirs = rates[f"ours {precision}"], rates[f"CT2 {precision}"]
                ratios = [a / b for a, b in zip(mine, theirs)]
                rows.append(
                    [
                        str(batch),
                        search,
                        precision,
                        f"{statistics.median(mine):,.1f}",
                        f"{statistics.median(theirs):,.1f}",
                        f"{statistics.median(token_rates[f'ours {precision}']):,.0f}",
                        f"{statistics.median(token_rates[f'CT2 {precision}']):,.0f}",
                        f"{statistics.median(ratios):.2f}",
                        f"{min(ratios):.2f}-{max(ratios):.2f}",
                    ]
                )
                print(rows[-1], flush=True)
    table = markdown_table(
        [
            "batch",
            "search",
            "precision",
            "ours sentences/s",
            "CT2 sentences/s",
            "ours tokens/s",
            "CT2 tokens/s",
            "ours / CT2",
            "range",
        ],
        rows,
    )
    print(table)
    if not args.no_record:
        measured = (
            f"Model: {model_name}; {len(sentences)} test_2016_flickr sentences, "
            f"at most {args.max_length} new tokens, no length penalty, {args.rounds} rounds "
            f"(median), CTranslate2 on {args.threads} threads"
        )
        append_run(
            RESULTS,
            "Decoding against CTranslate2",
            "benchmarks/against_ctranslate2.py",
            table,
            notes=[measured],
            elapsed=time.time() - started,
            load_at_start=load_at_start,
            packages={"CTranslate2": ctranslate2.__version__},
        )
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
