"""A real pretrained BERT-family folder: our loading, tokenizer and encoder against transformers.

Where `huggingface_checkpoints.py` checks random weights at published sizes, this reads a
folder as a user downloads it (e.g. sentence-transformers/all-MiniLM-L6-v2: `config.json`,
`model.safetensors`, `tokenizer.json`) and runs real text through both libraries:

* ``ids``: `load_huggingface(folder).tokenizer.encode` against transformers' tokenizer of
  the same folder (`tokenizer.json` where there is one), on SST-2 dev (in the repository)
  and a few awkward strings;
* ``hidden states``: the largest difference of the last hidden states at real positions,
  float32, batches of padded rows, token type 1 on the second half of each row;
* ``embedding difference``: for a sentence-transformers folder of mean pooling and
  `Normalize`, `sentence_embeddings` against transformers' hidden states pooled so;
* ``load s``, ``ours s``, ``theirs s``: loading, and the forward pass over every batch
  (ours: `encode`, TensorFlow or the `KERAS_BACKEND`; theirs: PyTorch on the CPU).

Run from the repository root, with a folder (`docs/guides/classification.md` says how to get
one; nothing is downloaded here)::

    python benchmarks/real_checkpoint.py --folder runs/all-MiniLM-L6-v2

The exit status is 1 when an id differs or a hidden state differs by more than
``--tolerance``.
"""

import argparse
import gzip
import json
import os
import sys
import time
import warnings

from machine import load_average
from results import append_run, markdown_table

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
SST2_DEV = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "examples",
    "text_classification",
    "data",
    "sst2",
    "dev.tsv.gz",
)
# Accents, CJK, punctuation runs, control characters, a long word, nothing at all.
AWKWARD = [
    "Crème brûlée à la CAFÉ — naïve façade!",
    "東京で映画を見た。很好看",
    "wait... what?!?! (really)",
    "tab\tand\u00adsoft\x07hyphen",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
    "",
    "   ",
]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, help="a Hugging Face BERT-family folder")
    parser.add_argument("--sentences", type=int, default=872, help="SST-2 dev sentences used")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest hidden difference")
    parser.add_argument("--no-record", action="store_true", help="print, do not append")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.folder, "config.json")):
        parser.error(f"--folder: no config.json in '{args.folder}'")
    return args


def sst2_dev(count):
    with gzip.open(SST2_DEV, "rt", encoding="utf-8") as file:
        rows = file.read().splitlines()[1:]
    return [row.rsplit("\t", 1)[0].strip() for row in rows][:count]


def batches(ids_rows, batch_size, pad_id):
    """`(ids, token_types, real)` NumPy batches: rows padded to the batch's longest."""
    import numpy as np

    for start in range(0, len(ids_rows), batch_size):
        rows = ids_rows[start : start + batch_size]
        length = max(len(row) for row in rows)
        ids = np.full((len(rows), length), pad_id, "int32")
        types = np.zeros_like(ids)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            types[i, len(row) // 2 : len(row)] = 1
        yield ids, types, ids != pad_id


def compare_hidden_states(model, theirs, ids_rows, batch_size, pad_id):
    """The largest hidden-state difference at real positions, each side's seconds, and
    transformers' states mean-pooled and normalised (a sentence-transformers folder's
    embeddings), one row per text.
    """
    import keras
    import numpy as np
    import torch

    largest, ours_seconds, theirs_seconds, pooled = 0.0, 0.0, 0.0, []
    for ids, types, real in batches(ids_rows, batch_size, pad_id):
        begin = time.perf_counter()
        hidden = keras.ops.convert_to_numpy(
            model.encode({"token_ids": ids, "token_type_ids": types})
        )
        ours_seconds += time.perf_counter() - begin
        begin = time.perf_counter()
        with torch.no_grad():
            expected = theirs(
                input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(real, dtype=torch.long),
                token_type_ids=torch.tensor(types, dtype=torch.long),
            ).last_hidden_state.numpy()
        theirs_seconds += time.perf_counter() - begin
        largest = max(largest, float(np.abs(hidden - expected)[real].max()))
        with torch.no_grad():  # token type 0, as sentence-transformers runs the texts
            states = theirs(
                input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(real, dtype=torch.long),
            ).last_hidden_state.numpy()
        mean = (states * real[..., None]).sum(1) / real.sum(1, keepdims=True)
        pooled.append(mean / np.linalg.norm(mean, axis=1, keepdims=True))
    return largest, ours_seconds, theirs_seconds, np.concatenate(pooled)


def mean_pooled_and_normalised(folder):
    """Whether `folder` is a sentence-transformers folder of mean pooling and `Normalize`."""
    try:
        with open(os.path.join(folder, "modules.json"), encoding="utf-8") as file:
            steps = [step.get("type", "") for step in json.load(file)]
        with open(os.path.join(folder, "1_Pooling", "config.json"), encoding="utf-8") as file:
            mean = json.load(file).get("pooling_mode_mean_tokens", False)
    except (OSError, ValueError, AttributeError):
        return False
    return mean and any(step.endswith("Normalize") for step in steps)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: never the network
    import keras
    import torch
    import transformers

    from keras_transformer.saving import load_huggingface

    warnings.simplefilter("ignore")
    started, load_at_start = time.time(), load_average()
    begin = time.perf_counter()
    bundle = load_huggingface(args.folder)
    load_seconds = time.perf_counter() - begin
    theirs_tokenizer = transformers.AutoTokenizer.from_pretrained(args.folder)
    theirs = transformers.AutoModel.from_pretrained(args.folder).eval()
    texts = sst2_dev(args.sentences) + AWKWARD
    ours_ids = bundle.tokenizer.encode(texts)  # with [CLS] and [SEP], as transformers
    theirs_ids = theirs_tokenizer(texts)["input_ids"]
    different = [text for text, a, b in zip(texts, ours_ids, theirs_ids) if a != b]
    largest, ours_seconds, theirs_seconds, pooled = compare_hidden_states(
        bundle.model, theirs, theirs_ids, args.batch_size, bundle.tokenizer.pad_id
    )
    passed = not different and largest <= args.tolerance
    embedding_difference = "-"
    if mean_pooled_and_normalised(args.folder):
        import numpy as np

        from keras_transformer.saving import sentence_embeddings

        embeddings = sentence_embeddings(bundle, texts, directory=args.folder)
        difference = float(np.abs(embeddings - pooled).max())
        passed = passed and difference <= args.tolerance
        embedding_difference = f"{difference:.1e}"
    name = os.path.basename(os.path.normpath(args.folder))
    rows = [
        [
            name,
            f"{len(texts) - len(different)} of {len(texts)} equal",
            f"{largest:.1e}",
            embedding_difference,
            f"{load_seconds:.2f}",
            f"{ours_seconds:.2f}",
            f"{theirs_seconds:.2f}",
        ]
    ]
    table = markdown_table(
        [
            "folder",
            "ids",
            "largest hidden difference",
            "largest embedding difference",
            "load s",
            "ours s",
            "theirs s",
        ],
        rows,
    )
    print(table)
    for text in different[:5]:
        print(f"ids differ: {text!r}")
    if not args.no_record:
        append_run(
            RESULTS,
            "A real pretrained checkpoint against transformers",
            "benchmarks/real_checkpoint.py",
            table,
            notes=[
                f"{args.sentences} SST-2 dev sentences and {len(AWKWARD)} awkward strings, "
                f"batches of {args.batch_size}, float32, backend {keras.backend.backend()}; "
                "transformers on PyTorch's CPU kernels"
            ],
            elapsed=time.time() - started,
            load_at_start=load_at_start,
            packages={"transformers": transformers.__version__, "PyTorch": torch.__version__},
        )
    return passed


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
