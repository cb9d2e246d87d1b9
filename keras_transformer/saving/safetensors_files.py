"""Reading and writing the weight files of a Hugging Face checkpoint folder."""

import json
import os

from keras_transformer.saving.pretrained import PretrainedDirectoryError

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")


class WeightFiles:
    """The weight files of a checkpoint folder: their tensors' shapes first, values after.

    Finds `model.safetensors`, or the shards `model.safetensors.index.json`
    names. A folder holding only PyTorch's pickle files is refused unless
    `allow_pickle=True`: unpickling a file from elsewhere can run its code.

    `shapes()` reads a safetensors file's header only (its table of names,
    dtypes, shapes and offsets, which safetensors checks against the file's
    length), so a `config.json` can be checked against the tensors in bounded
    time and memory before any layer is built. A pickle file has no such
    table: its tensors are read (as much memory as the file), then measured.

    Args:
        directory: the folder.
        allow_pickle: bool, also read `pytorch_model.bin`. Defaults to `False`.

    Raises:
        PretrainedDirectoryError: for a folder with no weights, or only a
            pickle file and `allow_pickle=False`.
    """

    def __init__(self, directory, allow_pickle=False):
        self.directory = directory
        single = os.path.join(directory, SAFETENSORS_FILE)
        index = os.path.join(directory, SAFETENSORS_INDEX)
        self.pickled = None
        self._tensors = None
        if os.path.isfile(single):
            self.files, self.name = [single], SAFETENSORS_FILE
            return
        if os.path.isfile(index):
            self.files, self.name = _shards(directory, index), f"the shards of {SAFETENSORS_INDEX}"
            return
        pickled = [name for name in PICKLE_FILES if os.path.isfile(os.path.join(directory, name))]
        if pickled and allow_pickle:
            self.files, self.name, self.pickled = [], pickled[0], pickled[0]
            return
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

    def shapes(self):
        """`{name: shape tuple}` of every tensor, from the headers alone (safetensors)."""
        if self.pickled:
            return {name: tuple(value.shape) for name, value in self.tensors().items()}
        from safetensors import safe_open

        shapes = {}
        for path in self.files:
            try:
                with safe_open(path, framework="numpy") as file:
                    for name in file.keys():
                        shapes[name] = tuple(file.get_slice(name).get_shape())
            except Exception as error:  # safetensors raises its own error types
                raise PretrainedDirectoryError(
                    f"'{path}' is not a readable safetensors file ({error})."
                ) from error
        return shapes

    def tensors(self):
        """Every tensor, `{name: float32 NumPy array}`."""
        if self._tensors is not None:
            return self._tensors
        if self.pickled:
            self._tensors = _read_pickle(self.directory, self.pickled)
            return self._tensors
        import numpy as np
        from safetensors.numpy import load_file

        tensors = {}
        for path in self.files:
            try:
                loaded = load_file(path)
            except Exception as error:  # safetensors raises its own error types
                raise PretrainedDirectoryError(
                    f"'{path}' is not a readable safetensors file ({error})."
                ) from error
            tensors.update({name: np.asarray(value, "float32") for name, value in loaded.items()})
        self._tensors = tensors
        return tensors


def read_tensors(directory, allow_pickle=False):
    """Every tensor of the folder's weights, `{name: float32 NumPy array}` (see `WeightFiles`)."""
    return WeightFiles(directory, allow_pickle=allow_pickle).tensors()


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
