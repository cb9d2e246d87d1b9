"""Reading and writing the weight files of a Hugging Face checkpoint folder."""

import json
import os

from keras_transformer.saving.pretrained import PretrainedDirectoryError

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")


def read_tensors(directory, allow_pickle=False):
    """Every tensor of the folder's weights, `{name: float32 NumPy array}`.

    Reads `model.safetensors`, or the shards `model.safetensors.index.json`
    names. A folder holding only PyTorch's pickle files is refused unless
    `allow_pickle=True`: unpickling a file from elsewhere can run its code.
    """
    import numpy as np
    from safetensors.numpy import load_file

    single = os.path.join(directory, SAFETENSORS_FILE)
    index = os.path.join(directory, SAFETENSORS_INDEX)
    if os.path.isfile(single):
        files = [single]
    elif os.path.isfile(index):
        files = _shards(directory, index)
    else:
        pickled = [name for name in PICKLE_FILES if os.path.isfile(os.path.join(directory, name))]
        if pickled and allow_pickle:
            return _read_pickle(directory, pickled[0])
        if pickled:
            raise PretrainedDirectoryError(
                f"'{directory}' holds its weights as '{pickled[0]}', a pickle file, which can "
                "run code when loaded. Convert it to safetensors (transformers: "
                "`model.save_pretrained(directory)` writes model.safetensors), or, if you trust "
                "the file, pass `allow_pickle=True`."
            )
        raise PretrainedDirectoryError(
            f"No weights in '{directory}': expected '{SAFETENSORS_FILE}' (or "
            f"'{SAFETENSORS_INDEX}' and its shards)."
        )
    tensors = {}
    for path in files:
        try:
            loaded = load_file(path)
        except Exception as error:  # safetensors raises its own error types
            raise PretrainedDirectoryError(
                f"'{path}' is not a readable safetensors file ({error})."
            ) from error
        tensors.update({name: np.asarray(value, "float32") for name, value in loaded.items()})
    return tensors


def _shards(directory, index):
    try:
        with open(index, encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise PretrainedDirectoryError(
            f"'{index}' is not a safetensors index (a JSON object with a `weight_map`)."
        ) from error
    files = []
    for name in sorted(set(weight_map.values())):
        path = os.path.join(directory, os.path.basename(name))
        if not os.path.isfile(path):
            raise PretrainedDirectoryError(f"'{index}' names the shard '{name}', which is missing.")
        files.append(path)
    return files


def _read_pickle(directory, name):
    import numpy as np
    import torch  # Only for the opt-in pickle format.

    if name.endswith(".json"):
        with open(os.path.join(directory, name), encoding="utf-8") as file:
            names = sorted(set(json.load(file)["weight_map"].values()))
    else:
        names = [name]
    tensors = {}
    for shard in names:
        state = torch.load(os.path.join(directory, shard), map_location="cpu", weights_only=True)
        tensors.update({key: value.float().numpy() for key, value in state.items()})
    return {key: np.asarray(value, "float32") for key, value in tensors.items()}


def write_tensors(path, tensors):
    """Writes `{name: array}` as a safetensors file transformers accepts."""
    import numpy as np
    from safetensors.numpy import save_file

    arrays = {name: np.ascontiguousarray(value, "float32") for name, value in tensors.items()}
    # transformers refuses a file without the framework it was written for.
    save_file(arrays, path, metadata={"format": "pt"})
