"""Compiling the generation loops once per shape bucket, and reading the model's current weights.

`generate` pads lengths up to a few bucket sizes so that calls with nearby lengths
reuse one compiled program: `tf.function(jit_compile=True)` on TensorFlow, `jax.jit`
on JAX (with the model's variables passed in as arguments, so a jitted function
never keeps weights from the time it was traced), plain eager execution elsewhere.
"""

import math
import weakref

import keras

from keras_transformer.ops.backend_paths import compile_function

# model -> {static configuration: CompiledFunction}; weak, so models can be freed.
_REGISTRY = weakref.WeakKeyDictionary()

_SMALLEST_BUCKET = 8


def bucket_length(length, maximum=None):
    """The bucket a length is padded to: 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, ...

    Up to 64, powers of two and their midpoints; from 64 on, quarter steps
    between powers of two. Decoding cost grows with the cache length, so
    buckets waste at most 25% above 64 (about 12% on average) while keeping the
    number of distinct shapes, hence of compilations, small. The result is
    capped at `maximum` when given.

    Args:
        length: int, at least 1.
        maximum: int, the largest allowed length (e.g. a learned position
            table's size). Defaults to `None` (no cap).

    Returns:
        int, at least `length` unless capped.

    Example:

    >>> from keras_transformer.generation import bucket_length
    >>> [bucket_length(n) for n in (1, 9, 13, 30, 80, 81, 130)]
    [8, 12, 16, 32, 80, 96, 160]
    """
    bucket = _SMALLEST_BUCKET
    while bucket < length:
        power = 2 ** int(math.floor(math.log2(bucket)))
        bucket += power // 4 if bucket >= 64 else power // 2
    if maximum is not None:
        bucket = min(bucket, maximum)
    return bucket


def prefill_bucket(length):
    """The largest power of two `<= length`, or `0`: how many prompt tokens to prefill."""
    return 0 if length < 1 else 2 ** int(math.floor(math.log2(length)))


class CompiledFunction:
    """A generation function of one model, compiled once per input shape.

    Args:
        model: the `keras.Model` whose methods `fn` calls.
        fn: callable `(model, *tensors) -> tensors`; it takes the model as an
            argument (rather than closing over it) so the registry, which
            holds `fn`, never keeps a model alive.
        jit_compile: bool. On TensorFlow, `True` compiles with XLA and `False`
            runs a `tf.function` graph; on JAX, `True` uses `jax.jit` and `False`
            runs eagerly. Ignored on other backends (eager).

    Attributes:
        trace_count: int, how many times `fn` was traced (compiled).
    """

    def __init__(self, model, fn, jit_compile=True):
        self.trace_count = 0
        self._model_ref = weakref.ref(model)
        self._fn = fn
        self._call = compile_function(
            self._run, self._traced, self._traced_stateless, self._current_state, jit_compile
        )

    def _current_state(self):
        model = self._model_ref()
        return (
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
        )

    def _run(self, *args):
        return self._fn(self._model_ref(), *args)

    def _traced(self, *args):
        self.trace_count += 1  # Python side effect: runs once per trace, not per call
        return self._run(*args)

    def _traced_stateless(self, state, *args):
        model = self._model_ref()
        trainable, non_trainable = state
        mapping = list(zip(model.trainable_variables, trainable)) + list(
            zip(model.non_trainable_variables, non_trainable)
        )
        # Variables read inside the scope resolve to the traced arguments, not to
        # the values they had at trace time.
        with keras.StatelessScope(state_mapping=mapping):
            return self._traced(*args)

    def __call__(self, *args):
        return self._call(*args)


def compiled_function(model, key, make_fn, jit_compile=True):
    """The model's `CompiledFunction` for the static configuration `key`.

    Args:
        model: a `keras.Model`.
        key: hashable, every Python value that changes the traced program.
        make_fn: callable `() -> fn`, called only when `key` is new; `fn` as
            in `CompiledFunction`.
        jit_compile: bool, see `CompiledFunction`.

    Returns:
        A `CompiledFunction`, the same object for the same `(model, key, jit_compile)`.
    """
    functions = _REGISTRY.setdefault(model, {})
    full_key = (key, bool(jit_compile))
    if full_key not in functions:
        functions[full_key] = CompiledFunction(model, make_fn(), jit_compile)
    return functions[full_key]


def trace_count(model):
    """How many times generation functions of `model` were traced, all together.

    `generate` pads lengths to buckets
    ([`bucket_length`][keras_transformer.generation.bucket_length]) so that
    calls of nearby lengths reuse one compiled program; this count shows whether
    they did (a test or a benchmark can check that it stays put). Functions run
    eagerly (JAX with `jit_compile=False`, PyTorch) are never traced.

    Args:
        model: a
            [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer]
            or [`TransformerLM`][keras_transformer.models.TransformerLM] (any
            model).

    Returns:
        int, the traces of all of `model`'s generation functions; `0` before
        its first `generate`.

    Example:

    >>> from keras_transformer.generation import trace_count
    >>> from keras_transformer.models import TransformerLM
    >>> lm = TransformerLM(50, num_layers=1, hidden_dim=16, num_heads=2,
    ...                    intermediate_dim=32)
    >>> trace_count(lm)
    0
    >>> _ = lm.generate([[5, 6, 7]], max_length=6, jit_compile=False)
    >>> traced = trace_count(lm)
    >>> _ = lm.generate([[8, 9, 10, 11]], max_length=7, jit_compile=False)
    >>> trace_count(lm) - traced  # the same buckets: the compiled search is reused
    0
    """
    return sum(f.trace_count for f in _REGISTRY.get(model, {}).values())
