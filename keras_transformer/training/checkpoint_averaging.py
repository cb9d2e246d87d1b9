"""Checkpoint averaging: the paper's final models average their last checkpoints."""

import os
import re
import shutil
import tempfile
import zipfile

import h5py
import keras
import numpy as np

from keras_transformer.validation import is_int

_SUFFIXES = (".weights.h5", ".keras")
# The files `CheckpointAveraging` writes: after N epochs, or after N batches.
_CHECKPOINT_NAME = re.compile(r"(epoch|step)-(\d+)\.weights\.h5")
# Where a `.keras` archive keeps its weights (the same layout as a `.weights.h5` file).
_ARCHIVE_WEIGHTS = "model.weights.h5"
# `model.save_weights` also stores the optimizer's slots under this top-level group.
_OPTIMIZER_GROUP = "optimizer"


def _path_key(name):
    # Keras names the groups `dense`, `dense_1`, ..., `dense_10` and the
    # variables `vars/0`, `vars/1`, ...: compare digit runs as numbers so that
    # `dense_10` follows `dense_9` and `vars/10` follows `vars/9`.
    return tuple(
        tuple(int(run) if i % 2 else run for i, run in enumerate(re.split(r"(\d+)", part)))
        for part in name.split("/")
    )


def _check_paths(paths):
    if isinstance(paths, (str, os.PathLike)):
        raise ValueError(
            f"`paths` must be a list of checkpoint files. Received a single path: {paths!r}. "
            "Wrap it in a list."
        )
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError(
            "`paths` is empty; pass at least one checkpoint file (`.weights.h5` or `.keras`)."
        )
    for path in paths:
        if not path.endswith(_SUFFIXES):
            raise ValueError(
                f"Checkpoint {path!r} in `paths` is neither a `.weights.h5` file (from "
                "`model.save_weights`) nor a `.keras` file (from `model.save`)."
            )
        if not os.path.isfile(path):
            raise ValueError(f"Checkpoint file not found: {path!r} (listed in `paths`).")
    return paths


def _weights_file(path, tmp_dir):
    """Returns the path of the HDF5 weights inside checkpoint `path`."""
    if path.endswith(".weights.h5"):
        return path
    with zipfile.ZipFile(path) as archive:
        if _ARCHIVE_WEIGHTS not in archive.namelist():
            raise ValueError(
                f"Checkpoint {path!r} holds no `{_ARCHIVE_WEIGHTS}`; it was not written by "
                "Keras 3 `model.save`."
            )
        # Extracted rather than read in place: HDF5 seeks around the file, and
        # seeking backwards in a compressed zip member re-inflates it from the start.
        folder = tempfile.mkdtemp(dir=tmp_dir)
        return archive.extract(_ARCHIVE_WEIGHTS, folder)


def _model_datasets(h5_file):
    """Maps path -> dataset for every model variable, leaving out the optimizer state."""
    datasets = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and name.split("/")[0] != _OPTIMIZER_GROUP:
            datasets[name] = obj

    h5_file.visititems(visit)
    return datasets


def _average(paths, tmp_dir):
    """Returns `(names, averages, first_weights_file)`, names in storage order."""
    names, specs, sums, latest, first_file = None, None, None, None, None
    for index, path in enumerate(paths):
        weights_file = _weights_file(path, tmp_dir)
        with h5py.File(weights_file, "r") as h5_file:
            datasets = _model_datasets(h5_file)
            if names is None:
                first_file = weights_file
                names = sorted(datasets, key=_path_key)
                specs = {n: (datasets[n].shape, datasets[n].dtype) for n in names}
                sums = {}
                latest = {}
            elif set(datasets) != set(names):
                missing = sorted(set(names) - set(datasets), key=_path_key)[:3]
                extra = sorted(set(datasets) - set(names), key=_path_key)[:3]
                raise ValueError(
                    f"Checkpoint {index} in `paths` ({path!r}) does not hold the same "
                    f"variables as checkpoint 0 ({paths[0]!r}): missing {missing}, "
                    f"unexpected {extra}. Average checkpoints of one architecture only."
                )
            for name in names:
                shape, dtype = specs[name]
                if datasets[name].shape != shape:
                    raise ValueError(
                        f"Checkpoint {index} in `paths` ({path!r}) has shape "
                        f"{datasets[name].shape} for weight `{name}`, but checkpoint 0 "
                        f"({paths[0]!r}) has shape {shape}. Average checkpoints of one "
                        "architecture only."
                    )
                value = datasets[name][()]
                if np.issubdtype(dtype, np.floating):
                    # A float64 running sum: float16 weights would overflow or round.
                    sums[name] = sums.get(name, 0.0) + value.astype(np.float64)
                else:
                    # Integer state (counters, ids) has no meaningful mean.
                    latest[name] = value
        if weights_file != path and weights_file != first_file:
            os.remove(weights_file)
    averages = [
        (sums[n] / len(paths)).astype(specs[n][1]) if n in sums else latest[n] for n in names
    ]
    return names, averages, first_file


def average_checkpoints(paths, model=None):
    """Averages the model weights of several checkpoints, element-wise.

    Reads checkpoints written by `model.save_weights` (`.weights.h5`) or
    `model.save` (`.keras`), in any mix, and averages every model weight,
    trainable and non-trainable (e.g. batch-norm statistics). The optimizer
    state stored alongside is ignored. Floating-point weights are averaged in
    float64 and cast back to their dtype; integer weights, which have no
    meaningful mean, take the value of the last checkpoint in `paths`.

    Args:
        paths: list of checkpoint paths (str or `os.PathLike`), all of the
            same architecture.
        model: optional built `keras.Model` of that architecture. When given,
            the averaged weights are loaded into it (its optimizer state is
            left untouched) and the model is returned. Defaults to `None`.

    Returns:
        `model`, when given. Otherwise the list of averaged NumPy arrays in
        the checkpoint's storage order: sorted by the variable paths Keras
        writes, such as `layers/dense_2/vars/0` (named after the layer type
        and position, numbers compared as numbers). That is the order of
        `model.get_weights()` only for simple stacks such as a `Sequential`
        of `Dense` layers; to load the averages into a model, pass `model`,
        which maps them by structure.

    Example:

    Two checkpoints of a one-weight model, its kernel at 1 and at 3:

    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
    >>> folder = tempfile.mkdtemp()
    >>> paths = [os.path.join(folder, f"epoch-{e}.weights.h5") for e in (1, 2)]
    >>> for path, value in zip(paths, (1.0, 3.0)):
    ...     model.set_weights([np.full((1, 1), value)])
    ...     model.save_weights(path)
    >>> [a.tolist() for a in average_checkpoints(paths)]
    [[[2.0]]]
    >>> average_checkpoints(paths, model=model).get_weights()[0].tolist()
    [[2.0]]
    >>> shutil.rmtree(folder)

    The paper averages the last five checkpoints of its base models:
    `average_checkpoints(paths[-5:], model=model)`.

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 6.1.
    """
    paths = _check_paths(paths)
    if model is not None and not isinstance(model, keras.Model):
        raise ValueError(
            f"`model` must be a `keras.Model` or `None`. Received: model={model!r}. "
            "Pass `model=None` to get the averaged arrays instead."
        )
    with tempfile.TemporaryDirectory() as tmp_dir:
        names, averages, first_file = _average(paths, tmp_dir)
        if model is None:
            return averages
        # Write the averages into a copy of the first checkpoint, so that
        # Keras maps them onto the model's variables with its own loader.
        averaged_file = os.path.join(tmp_dir, "averaged.weights.h5")
        shutil.copyfile(first_file, averaged_file)
        with h5py.File(averaged_file, "r+") as h5_file:
            for name, value in zip(names, averages):
                h5_file[name][...] = value
        skip = [model.optimizer] if getattr(model, "optimizer", None) is not None else None
        model.load_weights(averaged_file, objects_to_skip=skip)
    return model


class CheckpointAveraging(keras.callbacks.Callback):
    """Saves rolling checkpoints during `fit` and ends on their average.

    Every `save_freq`, writes `model.save_weights` to `directory` and deletes
    the oldest of its own files beyond the last `num_checkpoints`. When
    training ends, sets the model's weights (trainable and non-trainable) to
    the average of the kept checkpoints, as in
    [`average_checkpoints`][keras_transformer.training.average_checkpoints]; the
    optimizer state is not changed. The kept files stay on disk. If no
    checkpoint was written (e.g. `save_freq` larger than the run), the model is
    left as trained.

    Files are named `epoch-XXXXX.weights.h5` (1-based epoch) with
    `save_freq="epoch"`, and `step-XXXXXXXX.weights.h5` (batches trained by
    this callback) with an integer `save_freq`. Batches trained after the
    last save are not part of the average. Running `fit` again continues the
    rolling window. A new callback resumed at epoch `e > 0` (a run restarted by
    `BackupAndRestore`) adopts the checkpoints already in `directory` up to epoch
    `e` (or `e * steps` batches) and deletes later ones, so the resumed run
    averages what an uninterrupted run would; starting at epoch 0 it deletes
    the folder's old checkpoints.

    Args:
        directory: str or `os.PathLike`, the folder for the checkpoints;
            created if missing.
        num_checkpoints: int, how many of the latest checkpoints to keep and
            average. The paper uses 5 for base models and 20 for big ones.
            Defaults to `5`.
        save_freq: `"epoch"` to save at the end of every epoch, or an int `N`
            to save every `N` training batches. Defaults to `"epoch"`.

    Example:

    Three epochs, the last two kept; the model ends on their mean:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> folder = tempfile.mkdtemp()
    >>> history = model.fit(
    ...     np.ones((8, 2)), np.ones((8, 1)), batch_size=4, epochs=3, verbose=0,
    ...     callbacks=[CheckpointAveraging(folder, num_checkpoints=2)],
    ... )
    >>> sorted(os.listdir(folder))
    ['epoch-00002.weights.h5', 'epoch-00003.weights.h5']
    >>> kept = [os.path.join(folder, name) for name in sorted(os.listdir(folder))]
    >>> averages = average_checkpoints(kept)
    >>> all(np.allclose(a, w) for a, w in zip(averages, model.get_weights()))
    True
    >>> shutil.rmtree(folder)

    The paper's base models: `CheckpointAveraging("checkpoints", num_checkpoints=5)`
    for `model.fit(dataset, epochs=20, ...)` ends on the mean of epochs 16 to 20.

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 6.1.
    """

    def __init__(self, directory, num_checkpoints=5, save_freq="epoch"):
        super().__init__()
        if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
            raise ValueError(
                "`directory` must be a non-empty path to the checkpoint folder. "
                f"Received: directory={directory!r}."
            )
        if not is_int(num_checkpoints) or num_checkpoints <= 0:
            raise ValueError(
                "`num_checkpoints` must be a positive integer. "
                f"Received: num_checkpoints={num_checkpoints!r}. The paper uses 5 (base) "
                "or 20 (big)."
            )
        if save_freq != "epoch" and (not is_int(save_freq) or save_freq <= 0):
            raise ValueError(
                "`save_freq` must be 'epoch' or a positive number of batches. "
                f"Received: save_freq={save_freq!r}."
            )
        self.directory = os.fspath(directory)
        self.num_checkpoints = int(num_checkpoints)
        self.save_freq = save_freq if save_freq == "epoch" else int(save_freq)
        self.checkpoints = []  # Paths written and kept, oldest first.
        self._batches_seen = 0
        self._last_batch = -1
        self._next_save = self.save_freq if self.save_freq != "epoch" else None

    def on_train_begin(self, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        self._last_batch = -1
        self._first_epoch = True

    def on_epoch_begin(self, epoch, logs=None):
        if not self._first_epoch:
            return
        self._first_epoch = False
        steps = self.params.get("steps") if self.params else None
        if epoch > 0 and self.save_freq != "epoch" and steps:
            # Resumed (e.g. by `BackupAndRestore`) in a new process: count from there.
            self._batches_seen = epoch * steps
            self._next_save = (self._batches_seen // self.save_freq + 1) * self.save_freq
        if not self.checkpoints:
            self._adopt_checkpoints_on_disk(epoch, steps)

    def _adopt_checkpoints_on_disk(self, epoch, steps):
        """Keeps the checkpoints saved before `epoch` by an earlier process of this run.

        A resumed run must average the same checkpoints as one never stopped. Those
        written after the resumed point (by the part of the run that was lost, or by an
        older run in the same folder) are removed: this run writes them again.
        """
        positions = {"epoch": epoch, "step": epoch * steps if steps else None}
        found = []
        for name in os.listdir(self.directory):
            match = _CHECKPOINT_NAME.fullmatch(name)
            if match is None:
                continue
            kind, position = match.group(1), int(match.group(2))
            path = os.path.join(self.directory, name)
            if positions[kind] is not None and position <= positions[kind]:
                found.append((position, path))
            else:
                os.remove(path)
        for _, path in sorted(found)[-self.num_checkpoints :]:
            self.checkpoints.append(path)
        for _, path in sorted(found)[: -self.num_checkpoints]:
            os.remove(path)

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        # `batch` restarts every epoch and, with `steps_per_execution > 1`,
        # advances by several batches per call.
        self._batches_seen += batch + 1 if batch <= self._last_batch else batch - self._last_batch
        self._last_batch = batch
        if self._batches_seen >= self._next_save:
            self._save(f"step-{self._batches_seen:08d}.weights.h5")
            self._next_save = (self._batches_seen // self.save_freq + 1) * self.save_freq

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(f"epoch-{epoch + 1:05d}.weights.h5")

    def on_train_end(self, logs=None):
        if self.checkpoints:
            average_checkpoints(self.checkpoints, model=self.model)

    def _save(self, filename):
        path = os.path.join(self.directory, filename)
        self.model.save_weights(path)
        if path in self.checkpoints:  # Overwritten by a later `fit` call.
            self.checkpoints.remove(path)
        self.checkpoints.append(path)
        while len(self.checkpoints) > self.num_checkpoints:
            stale = self.checkpoints.pop(0)
            if os.path.exists(stale):
                os.remove(stale)

    def get_config(self):
        return {
            "directory": self.directory,
            "num_checkpoints": self.num_checkpoints,
            "save_freq": self.save_freq,
        }
