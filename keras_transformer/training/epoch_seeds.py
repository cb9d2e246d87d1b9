"""Random draws that depend on the epoch, not on the history of the process."""

import keras
import numpy as np

# An epoch's seed is the generator's seed plus `epoch` times this odd constant (the golden
# ratio's 32-bit fraction), kept under 2**31 for every backend's state dtype (JAX: uint32).
EPOCH_STRIDE = 0x9E3779B1
SEED_MODULUS = 2**31


def epoch_seed(seed, epoch):
    """The seed a generator seeded with `seed` draws with in epoch `epoch`."""
    return (seed + epoch * EPOCH_STRIDE) % SEED_MODULUS


class EpochSeeds(keras.callbacks.Callback):
    """Restarts every seed generator of the model at a seed fixed by the epoch.

    A Keras `SeedGenerator` (one per dropout in our layers) is a seed and a counter
    that every draw advances. `BackupAndRestore` does not save the counters, so a run
    killed in epoch `e` and resumed draws, from epoch `e` on, the dropout masks of
    epoch 0 again, and ends with other weights than the run that was never killed.
    With this callback each generator starts every epoch afresh, its counter at 0 and
    its seed moved by the epoch number (`epoch_seed`): an epoch's masks depend only on
    the seeds (fixed by `keras.utils.set_random_seed` before the model is built) and
    the epoch number, so a resumed run repeats the uninterrupted one exactly (given the
    same data order, see [resuming a run][resuming] in the translation guide).

    On PyTorch, Keras draws the masks of a dropout built without an explicit seed
    from torch's global generator, which this callback leaves alone: resumed runs are
    exact on TensorFlow and JAX.

    Example:

    A dropout seeded with 7, two batches per epoch: after three epochs its
    generator holds epoch 2's seed and has drawn twice since the epoch began,
    whatever happened before.

    >>> model = keras.Sequential(
    ...     [keras.Input((4,)), keras.layers.Dropout(0.5, seed=7), keras.layers.Dense(1)]
    ... )
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> history = model.fit(
    ...     np.ones((8, 4)), np.ones((8, 1)), batch_size=4, epochs=3, verbose=0,
    ...     callbacks=[EpochSeeds()],
    ... )
    >>> state = [v for v in model.variables if v.path.endswith("seed_generator_state")][0]
    >>> keras.ops.convert_to_numpy(state.value).tolist() == [epoch_seed(7, 2), 2]
    True

    With a resumable run: `callbacks=[keras.callbacks.BackupAndRestore("backup"),
    EpochSeeds()]`.
    """

    def on_train_begin(self, logs=None):
        # A generator's state is `[seed, counter]`; draws change only the counter. Its seed
        # as built is read here, so use a new model (or process) for each resumed run.
        self._states = [
            variable
            for variable in self.model.variables
            if variable.path.endswith("seed_generator_state")
        ]
        self._seeds = [int(keras.ops.convert_to_numpy(state.value)[0]) for state in self._states]

    def on_epoch_begin(self, epoch, logs=None):
        for state, seed in zip(self._states, self._seeds):
            state.assign(np.array([epoch_seed(seed, epoch), 0], dtype=state.dtype))
