"""Writes the files of tests/saving/files_before_restructure: small models saved by the
code of the commit this script runs on, their inputs and the outputs they gave.

Run from a checkout of the commit that made them (see README.md), on TensorFlow:

    PYTHONPATH=. python make_files.py OUTPUT_FOLDER

OUTPUT_FOLDER defaults to the folder holding this script. Each case writes
`<name>.keras.gz` (`model.save`, gzipped), `<name>_pretrained/` (`save_pretrained`, its
`model.weights.h5` gzipped) and `<name>.npz` (the inputs, the outputs of a forward call
and, for the generating models, the ids of greedy `generate`); `manifest.json` lists them.
"""

import gzip
import json
import os
import pathlib
import shutil
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_transformer  # noqa: E402
from keras_transformer.layers import (  # noqa: E402
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)
from keras_transformer.models import (  # noqa: E402
    MaskedLM,
    Seq2SeqTransformer,
    TransformerClassifier,
    TransformerLM,
)
from keras_transformer.saving import save_pretrained  # noqa: E402

VOCABULARY = 50
SIZES = dict(hidden_dim=16, num_heads=2, intermediate_dim=32)
# Without jit_compile: the same ids, and faster for one short call on every backend.
GENERATE = dict(method="greedy", max_length=6, jit_compile=False)

# Padding (id 0) in some rows, so that the masks are exercised.
TOKEN_IDS = np.array([[5, 17, 23, 9, 31, 0], [12, 44, 3, 0, 0, 0]], "int32")
SOURCE_IDS = np.array([[5, 17, 23, 9, 0], [12, 44, 3, 38, 21]], "int32")
TARGET_IDS = np.array([[1, 30, 11, 0], [1, 7, 26, 40]], "int32")
PROMPT_IDS = np.array([[5, 17, 23], [12, 44, 0]], "int32")


def randomize(model, seed):
    """Weights of standard deviation 0.3 (layer-norm scales around 1): logits far from
    uniform, so that greedy decoding has no near-ties and any change shows."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        value = rng.normal(0.0, 0.3, variable.shape)
        if variable.path.endswith("gamma"):
            value += 1.0
        variable.assign(value.astype(variable.dtype))
    return model


def functional_encoder():
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    x = TokenAndPositionEmbedding(VOCABULARY, 16, name="embedding")(token_ids)
    x = TransformerEncoder(
        num_layers=2, num_heads=2, intermediate_dim=32, norm_first=False, name="encoder"
    )(x)
    outputs = keras.layers.Dense(VOCABULARY, name="logits")(x)
    return keras.Model(token_ids, outputs, name="functional_encoder"), {"token_ids": TOKEN_IDS}


def functional_blocks_rotary():
    source = keras.Input((None,), dtype="int32", name="encoder_token_ids")
    target = keras.Input((None,), dtype="int32", name="decoder_token_ids")
    block = dict(num_heads=2, intermediate_dim=32, norm_first=True, position="rotary")
    memory = TokenAndPositionEmbedding(VOCABULARY, 16, position="rotary", name="source_embedding")(
        source
    )
    memory = TransformerEncoderBlock(**block, name="encoder_block")(memory)
    x = TokenAndPositionEmbedding(VOCABULARY, 16, position="rotary", name="target_embedding")(
        target
    )
    x = TransformerDecoderBlock(**block, name="decoder_block")(x, memory)
    outputs = keras.layers.Dense(VOCABULARY, name="logits")(x)
    model = keras.Model([source, target], outputs, name="functional_blocks_rotary")
    return model, {"encoder_token_ids": SOURCE_IDS, "decoder_token_ids": TARGET_IDS}


def seq2seq():
    model = Seq2SeqTransformer(
        VOCABULARY, num_encoder_layers=1, num_decoder_layers=2, start_id=1, end_id=2, **SIZES
    )
    return model, {"encoder_token_ids": SOURCE_IDS, "decoder_token_ids": TARGET_IDS}


def lm_grouped_query():
    model = TransformerLM(VOCABULARY, num_layers=2, num_key_value_heads=1, **SIZES)
    return model, {"token_ids": TOKEN_IDS}


def lm_alibi_prenorm():
    model = TransformerLM(VOCABULARY, num_layers=1, position="alibi", norm_first=True, **SIZES)
    return model, {"token_ids": TOKEN_IDS}


def classifier():
    model = TransformerClassifier(VOCABULARY, 3, num_layers=1, **SIZES)
    return model, {"token_ids": TOKEN_IDS}


def masked_lm():
    model = MaskedLM(VOCABULARY, num_layers=2, **SIZES)
    positions = np.array([[1, 3], [0, 2]], "int32")
    return model, {"token_ids": TOKEN_IDS, "mask_positions": positions}


def seq2seq_int8():
    return seq2seq()


def lm_rotary_lora():
    model = TransformerLM(VOCABULARY, num_layers=1, position="rotary", **SIZES)
    return model, {"token_ids": TOKEN_IDS}


# name: (builder, generate's input name or None, after: None, "int8" or "lora")
CASES = {
    "functional_encoder": (functional_encoder, None, None),
    "functional_blocks_rotary": (functional_blocks_rotary, None, None),
    "seq2seq": (seq2seq, "encoder_token_ids", None),
    "lm_grouped_query": (lm_grouped_query, "token_ids", None),
    "lm_alibi_prenorm": (lm_alibi_prenorm, "token_ids", None),
    "classifier": (classifier, None, None),
    "masked_lm": (masked_lm, None, None),
    "seq2seq_int8": (seq2seq_int8, "encoder_token_ids", "int8"),
    "lm_rotary_lora": (lm_rotary_lora, "token_ids", "lora"),
}


def forward(model, inputs):
    """Outputs of `model` for a dict of inputs (a single one is passed as an array)."""
    if len(inputs) == 1:
        (inputs,) = inputs.values()
    return keras.ops.convert_to_numpy(model(inputs, training=False))


def gzip_file(path):
    """`path` -> `path.gz` (no time stamp inside: the same bytes give the same file).
    The HDF5 weights are mostly zero padding; the test decompresses them again."""
    with open(path, "rb") as source, open(f"{path}.gz", "wb") as target:
        with gzip.GzipFile(filename="", mode="wb", fileobj=target, mtime=0) as packed:
            shutil.copyfileobj(source, packed)
    os.remove(path)


def make(name, folder, seed):
    builder, generate_input, after = CASES[name]
    keras.utils.set_random_seed(seed)
    model, inputs = builder()
    randomize(model, seed)
    if after == "int8":
        model.quantize("int8")
    elif after == "lora":
        model.enable_lora(2)
        # B starts at zero; a non-zero B makes the saved (merged) kernels differ.
        rng = np.random.default_rng(seed + 1000)
        for layer in model.lora_targets():
            b = layer.lora_kernel_b
            b.assign(rng.normal(0.0, 0.3, b.shape).astype(b.dtype))
    entry = {"keras": f"{name}.keras.gz", "pretrained": None, "arrays": f"{name}.npz"}
    model.save(folder / f"{name}.keras")
    gzip_file(folder / f"{name}.keras")
    try:
        directory = save_pretrained(model, folder / f"{name}_pretrained", metadata={"case": name})
        gzip_file(directory / "model.weights.h5")
        entry["pretrained"] = directory.name
    except Exception as error:  # recorded, not fatal: the .keras file still counts
        entry["pretrained_error"] = f"{type(error).__name__}: {error}"
    arrays = {f"input.{key}": value for key, value in inputs.items()}
    arrays["output"] = forward(model, inputs)
    if generate_input is not None:
        prompt = PROMPT_IDS if generate_input == "token_ids" else SOURCE_IDS
        arrays["generate_input"] = prompt
        arrays["generate_ids"] = np.asarray(model.generate(prompt, **GENERATE))
        entry["generate"] = GENERATE
    np.savez(folder / entry["arrays"], **arrays)
    return entry


def commit():
    try:
        command = ["git", "rev-parse", "--short", "HEAD"]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    print("keras_transformer from", keras_transformer.__file__)
    print("keras", keras.__version__, "backend", keras.backend.backend())
    manifest = {
        "commit": commit(),
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "cases": {},
    }
    for seed, name in enumerate(CASES):
        for old in folder.glob(f"{name}.*"):
            old.unlink()
        shutil.rmtree(folder / f"{name}_pretrained", ignore_errors=True)
        manifest["cases"][name] = make(name, folder, seed)
        print(name, manifest["cases"][name])
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
