"""How often XLA compiled a model's training and evaluation steps, epoch by epoch.

Under XLA (JAX, or TensorFlow with `jit_compile=True`) a step compiles once per input
shape, which takes seconds on a CPU; the examples pad their batches to a bounded set of
shapes (`fixed_shapes=True` of the `keras_transformer.text` pipelines) and, with
`--verbose`, print what `CompilationCounter` counted. On JAX it counts the compilations
themselves, from `jax.monitoring`'s compile events; TensorFlow has no public count of its
XLA compilations, so there the examples report the distinct batch shapes instead, which
XLA compiles once each (`batch_shapes`).
"""

import collections
import time

import keras

# The names Keras's JAX trainer gives the jitted steps (`jax.jit(self.train_step)`, ...).
STEP_NAMES = {"jit(train_step)": "train", "jit(test_step)": "test"}
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# A program read from the persistent compilation cache (`examples.compilation_cache`) instead
# of compiled. JAX names no function in it, but records it inside the compile event of the
# same program, which ends after it: that event then counts as a load.
CACHE_LOAD_EVENT = "/jax/compilation_cache/cache_retrieval_time_sec"


def batch_shapes(dataset):
    """The distinct shapes of a dataset's batches: `{(component shapes...): batches}`.

    Args:
        dataset: an iterable of batches, each a nest of arrays or tensors.

    Returns:
        A `collections.Counter` of the tuple of every component's shape.
    """
    counts = collections.Counter()
    for batch in dataset:
        counts[tuple(tuple(part.shape) for part in keras.tree.flatten(batch))] += 1
    return counts


class CompilationCounter(keras.callbacks.Callback):
    """Counts the XLA compilations of `fit`'s train and test steps, per epoch (JAX only).

    Listens to `jax.monitoring`'s backend-compile events of the functions Keras jits as
    `train_step` and `test_step` (evaluation inside `fit` included) from the start of
    training until its end; a step loaded from the persistent compilation cache
    (`examples.compilation_cache`) counts as loaded, not compiled. On another backend it
    counts nothing (`available` is `False`).

    Attributes:
        epochs: list of dicts, one per finished epoch: `{"train": n, "test": n,
            "train_seconds": s, "test_seconds": s, "loaded": n, "loaded_seconds": s,
            "seconds": s}`, the compilations, the seconds XLA spent on them, the steps
            loaded from the compilation cache and the seconds that took, and the epoch's
            wall time.
        available: bool, whether compilations are counted (the JAX backend).

    Example:

    >>> counter = CompilationCounter()
    >>> # model.fit(data, epochs=2, callbacks=[counter]); counter.epochs[0]["train"]
    """

    def __init__(self):
        super().__init__()
        self.epochs = []
        self.available = keras.backend.backend() == "jax"
        self._current = None
        self._listener = None
        self._loads_pending = 0

    def _record(self, name, seconds, **kwargs):
        if name == CACHE_LOAD_EVENT:
            self._loads_pending += 1
            return
        if name != COMPILE_EVENT:
            return
        loaded = self._loads_pending > 0
        self._loads_pending -= loaded
        step = STEP_NAMES.get(kwargs.get("fun_name"))
        if step is None or self._current is None:
            return
        if loaded:
            self._current["loaded"] += 1
            self._current["loaded_seconds"] += seconds
        else:
            self._current[step] += 1
            self._current[f"{step}_seconds"] += seconds

    def on_train_begin(self, logs=None):
        if not self.available or self._listener is not None:
            return
        import jax.monitoring

        self._listener = self._record
        jax.monitoring.register_event_duration_secs_listener(self._listener)

    def on_epoch_begin(self, epoch, logs=None):
        self._started = time.perf_counter()
        self._current = dict(
            train=0, test=0, train_seconds=0.0, test_seconds=0.0, loaded=0, loaded_seconds=0.0
        )

    def on_epoch_end(self, epoch, logs=None):
        if self._current is None:
            return
        self._current["seconds"] = time.perf_counter() - self._started
        self.epochs.append(self._current)
        self._current = None

    def on_train_end(self, logs=None):
        if self._listener is None:
            return
        import jax.monitoring

        # Older JAX releases cannot unregister one listener; `_current` is then None.
        unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
        if unregister is not None:
            unregister(self._listener)
            self._listener = None

    @property
    def total(self):
        """`(train, test)` compilations over every finished epoch."""
        return (
            sum(epoch["train"] for epoch in self.epochs),
            sum(epoch["test"] for epoch in self.epochs),
        )

    def summary(self):
        """One line per epoch, e.g. `epoch 1: 80.1 s; compiled the train step 6 times ...`."""
        lines = []
        for number, epoch in enumerate(self.epochs, 1):
            line = f"epoch {number}: {epoch['seconds']:.1f} s"
            if self.available:
                line += (
                    f"; compiled the train step {epoch['train']} times "
                    f"({epoch['train_seconds']:.1f} s of XLA), the test step {epoch['test']} "
                    f"times ({epoch['test_seconds']:.1f} s)"
                )
                if epoch.get("loaded"):
                    line += (
                        f"; loaded the steps {epoch['loaded']} times from the compilation "
                        f"cache ({epoch['loaded_seconds']:.1f} s)"
                    )
            lines.append(line)
        return lines
