"""Random draws that depend on the epoch, not on the history of the process."""

import keras
import numpy as np

# Each draw advances a seed generator's counter by one; epochs start this far apart.
EPOCH_STRIDE = 2**32


class EpochSeeds(keras.callbacks.Callback):
    """Restarts every seed generator of the model at a point fixed by the epoch.

    A Keras `SeedGenerator` (one per dropout in our layers) is a seed and a counter
    that every draw advances. `BackupAndRestore` does not save the counters, so a run
    killed in epoch `e` and resumed draws, from epoch `e` on, the dropout masks of
    epoch 0 again, and ends with other weights than the run that was never killed.
    With this callback each generator's counter is set to `epoch * 2**32` when an
    epoch begins: an epoch's masks depend only on the seeds (fixed by
    `keras.utils.set_random_seed` before the model is built) and the epoch number,
    so a resumed run repeats the uninterrupted one exactly (given the same data
    order, see the translation example).

    Example:

    ```python
    keras.utils.set_random_seed(0)
    model = keras_transformer.models.build("translation", preset="tiny", ...)
    model.fit(
        dataset,
        epochs=10,
        callbacks=[keras.callbacks.BackupAndRestore("backup"), EpochSeeds()],
    )
    ```
    """

    def on_train_begin(self, logs=None):
        # A generator's state is `[seed, counter]`; draws change only the counter.
        self._states = [
            variable
            for variable in self.model.variables
            if variable.path.endswith("seed_generator_state")
        ]
        self._seeds = [int(keras.ops.convert_to_numpy(state.value)[0]) for state in self._states]

    def on_epoch_begin(self, epoch, logs=None):
        for state, seed in zip(self._states, self._seeds):
            state.assign(np.array([seed, epoch * EPOCH_STRIDE], dtype=state.dtype))
