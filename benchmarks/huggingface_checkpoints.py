"""Hugging Face checkpoints at their real sizes: parity with transformers and time to load.

For each architecture, a model of the published size (opus-mt-en-de for MarianMT,
bert-base-uncased, gpt2) is built by transformers from its config with random weights
(offline: nothing is downloaded), given random values in every tensor, and saved with
`save_pretrained`. Then:

* ``load s``: seconds of `keras_transformer.saving.load_huggingface(folder)` (config,
  safetensors, building our model, assigning the weights), the median of ``--rounds``;
* ``largest logit difference``: between our logits and transformers' (float32, PyTorch
  on the CPU) on a batch of two rows, the second padded, at the real positions (BERT:
  token types 0 and 1; Marian: teacher-forced decoder inputs);
* ``save s`` and ``round trip``: `save_huggingface` of the loaded model, and whether
  transformers reads it back with every tensor equal to the original's.

Run from the repository root::

    python benchmarks/huggingface_checkpoints.py
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

from machine import load_average
from results import append_run, markdown_table

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed loads per architecture")
    parser.add_argument("--no-record", action="store_true", help="print, do not append")
    return parser.parse_args(argv)


def configs(transformers):
    marian = transformers.MarianConfig(
        vocab_size=58101,
        decoder_vocab_size=58101,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        activation_function="swish",
        scale_embedding=True,
        max_position_embeddings=512,
        pad_token_id=58100,
        eos_token_id=0,
        decoder_start_token_id=58100,
        forced_eos_token_id=None,
    )
    bert = transformers.BertConfig()  # bert-base-uncased's sizes are the defaults
    gpt2 = transformers.GPT2Config()  # gpt2 (124M)'s sizes are the defaults
    return [
        ("MarianMT (opus-mt-en-de size)", transformers.MarianMTModel, marian),
        ("BERT (bert-base size), masked LM", transformers.BertForMaskedLM, bert),
        ("GPT-2 (124M)", transformers.GPT2LMHeadModel, gpt2),
    ]


def randomize(torch, model):
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.05)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(generator=generator)
            pad = model.config.pad_token_id
            model.get_encoder().embed_tokens.weight[pad] = 0
    return model.eval()


def compare(np, torch, keras, name, theirs, ours):
    """The largest logit difference at real positions on a padded batch of two rows."""
    if name.startswith("MarianMT"):
        pad = theirs.config.pad_token_id
        source = np.array([[100, 200, 300, 400, 0], [500, 600, 0, pad, pad]])
        target = np.array([[pad, 7, 8, 9], [pad, 10, 11, pad]])
        with torch.no_grad():
            expected = theirs(
                input_ids=torch.tensor(source),
                attention_mask=torch.tensor(source != pad),
                decoder_input_ids=torch.tensor(target),
            ).logits.numpy()
        logits = ours({"encoder_token_ids": source, "decoder_token_ids": target})
        real = target != pad
        real[:, 0] = True
    elif name.startswith("BERT"):
        ids = np.array([[101, 2000, 3000, 4000, 102], [101, 5000, 102, 0, 0]])
        types = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
        with torch.no_grad():
            expected = theirs(
                input_ids=torch.tensor(ids),
                attention_mask=torch.tensor(ids != 0),
                token_type_ids=torch.tensor(types),
            ).logits.numpy()
        logits = ours({"token_ids": ids, "token_type_ids": types})
        real = ids != 0
    else:
        ids = np.array([[464, 3290, 318, 257, 922, 1110], [40, 588, 50256, 50256, 50256, 50256]])
        real = np.array([[1] * 6, [1, 1, 0, 0, 0, 0]]) == 1
        with torch.no_grad():
            expected = theirs(
                input_ids=torch.tensor(ids), attention_mask=torch.tensor(real.astype("int64"))
            ).logits.numpy()
        logits = ours(ids)
    return float(np.abs(keras.ops.convert_to_numpy(logits) - expected)[real].max())


def main(argv=None):
    args = parse_args(argv)
    import keras
    import numpy as np
    import torch
    import transformers

    from keras_transformer.saving import load_huggingface, save_huggingface

    warnings.simplefilter("ignore")
    started, load_at_start = time.time(), load_average()
    rows = []
    for name, model_class, config in configs(transformers):
        theirs = randomize(torch, model_class(config))
        parameters = sum(p.numel() for p in theirs.parameters())
        with tempfile.TemporaryDirectory() as directory:
            folder = os.path.join(directory, "theirs")
            theirs.save_pretrained(folder)
            times = []
            for _ in range(args.rounds):
                keras.backend.clear_session()
                begin = time.perf_counter()
                ours = load_huggingface(folder).model
                times.append(time.perf_counter() - begin)
            difference = compare(np, torch, keras, name, theirs, ours)
            begin = time.perf_counter()
            written = save_huggingface(ours, os.path.join(directory, "ours"))
            save_seconds = time.perf_counter() - begin
            reread = model_class.from_pretrained(written).state_dict()
            expected = theirs.state_dict()
            equal = all(torch.equal(value, expected[key]) for key, value in reread.items())
        rows.append(
            [
                name,
                f"{parameters / 1e6:.1f}M",
                f"{statistics.median(times):.2f}",
                f"{difference:.1e}",
                f"{save_seconds:.2f}",
                "equal" if equal else "DIFFERENT",
            ]
        )
        print(rows[-1], flush=True)
    table = markdown_table(
        ["checkpoint", "parameters", "load s", "largest logit difference", "save s", "round trip"],
        rows,
    )
    print(table)
    if not args.no_record:
        append_run(
            RESULTS,
            "Hugging Face checkpoints: parity and load time",
            "benchmarks/huggingface_checkpoints.py",
            table,
            notes=[],
            elapsed=time.time() - started,
            load_at_start=load_at_start,
            packages={"transformers": transformers.__version__, "PyTorch": torch.__version__},
        )
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
