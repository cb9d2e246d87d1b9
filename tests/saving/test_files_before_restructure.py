"""Files saved before the layer restructuring still load, with the outputs they gave then.

tests/saving/files_before_restructure holds small models saved by commit d917156 (see its
README.md): `model.save` archives and `save_pretrained` directories of functional models
stacking the public layers and of every model class (grouped-query, ALiBi and rotary LMs,
an int8-quantised and a LoRA-merged one), with the inputs, the outputs of a forward call
and the ids of greedy `generate` recorded right after saving. A change of a layer's
sub-layer names, weight order or quantisation bookkeeping makes one of them fail to load
or compute something else.
"""

import gzip
import json
import pathlib
import shutil

import keras
import numpy as np
import pytest

from keras_transformer.saving import load_pretrained
from tests.harness import without_gc_collect

pytestmark = pytest.mark.backend_agnostic

FOLDER = pathlib.Path(__file__).parent / "files_before_restructure"
MANIFEST = json.loads((FOLDER / "manifest.json").read_text(encoding="utf-8"))
CASES = MANIFEST["cases"]
# One test per saved file: each case's `.keras` archive and `save_pretrained` directory.
FILES = [(name, "keras") for name in CASES] + [
    (name, "pretrained") for name, entry in CASES.items() if entry["pretrained"]
]


def gunzip(packed, path):
    """The HDF5 weights are stored gzipped (mostly zero padding): their bytes as saved."""
    with gzip.open(packed, "rb") as source, open(path, "wb") as target:
        shutil.copyfileobj(source, target)


def load(entry, kind, folder):
    if kind == "keras":
        path = folder / entry["keras"].removesuffix(".gz")
        gunzip(FOLDER / entry["keras"], path)
        return keras.saving.load_model(path)
    directory = folder / entry["pretrained"]
    shutil.copytree(FOLDER / entry["pretrained"], directory)
    weights = directory / "model.weights.h5"
    gunzip(f"{weights}.gz", weights)
    pathlib.Path(f"{weights}.gz").unlink()
    return load_pretrained(directory).model


@pytest.mark.parametrize("name, kind", FILES, ids=[f"{name}-{kind}" for name, kind in FILES])
def test_file_loads_with_the_same_outputs(name, kind, tmp_path):
    entry = CASES[name]
    with without_gc_collect():  # loading the int8 model quantises it again: seconds of gc
        model = load(entry, kind, tmp_path)
    arrays = np.load(FOLDER / entry["arrays"])
    inputs = {
        key.removeprefix("input."): arrays[key] for key in arrays.files if key.startswith("input.")
    }
    if len(inputs) == 1:  # as make_files.py passed it: an array, not a dict
        (inputs,) = inputs.values()
    outputs = keras.ops.convert_to_numpy(model(inputs, training=False))
    np.testing.assert_allclose(outputs, arrays["output"], rtol=1e-5, atol=1e-5)
    if "generate" in entry:
        ids = model.generate(arrays["generate_input"], **entry["generate"])
        np.testing.assert_array_equal(ids, arrays["generate_ids"])
