"""The shared layer test: every public layer goes through `run_layer_test`.

It checks, for one layer configuration and one input:
- `get_config` / `from_config` round-trips to a JSON-identical config, and the
  layer is registered under the package `keras_transformer`;
- eager output shape and `compute_output_shape` / symbolic output shape;
- a functional model holding the layer saves to `.keras` and loads (without
  `custom_objects`) with identical outputs;
- XLA (`jit_compile=True`) outputs equal eager outputs;
- one `fit` step with `jit_compile=True` gives a finite loss and moves weights;
  (on PyTorch, where `jit_compile=True` means `torch.compile`, experimental in Keras and
  80-100 s a model on two cores, the XLA check is skipped and the step runs eagerly);
- every trainable weight gets a finite, non-zero gradient;
- under `mixed_float16` and `mixed_bfloat16` the outputs are finite and in the
  compute dtype while the weights stay float32;
- (once per layer class) `model.quantize` ("int8", "int4", "float8") on a copy gives
  finite outputs near the float ones (a wrong scale is off by orders of magnitude) and
  the int8 copy, saved to `.keras` and loaded, the same outputs; LoRA on every
  projection starts as an exact no-op.
  (`tests/reference/test_quantization_parity.py` holds the layers to the error
  Keras core's and keras-hub's own layers make with the same weights.)

A class's further configurations pass `variant=True`: the checks that depend on the
configuration only (config, shapes, weight count, gradients).
"""

import contextlib
import gc
import json
import os
import tempfile

import keras
import numpy as np
from keras import ops

import keras_transformer  # noqa: F401  (registers the layers)

# Keys shift every logit of a row by the same q·b, which softmax ignores, so the
# key bias gets a zero gradient by construction.
ZERO_GRADIENT_WEIGHTS = ("key/bias",)


def _as_inputs(input_data):
    if isinstance(input_data, dict):
        return dict(input_data)
    return {None: input_data}


def _call(layer, inputs, call_kwargs, training=None):
    kwargs = dict(call_kwargs)
    if training is not None:
        kwargs["training"] = training
    if None in inputs:
        return layer(inputs[None], **kwargs)
    return layer(**inputs, **kwargs)


def _first(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _build_model(layer, inputs, call_kwargs):
    symbolic = {
        name: keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name or "inputs")
        for name, value in inputs.items()
    }
    outputs = _first(_call(layer, symbolic, call_kwargs))
    model_inputs = symbolic[None] if None in symbolic else symbolic
    return keras.Model(model_inputs, outputs)


def _model_inputs(inputs):
    return inputs[None] if None in inputs else {k: v for k, v in inputs.items()}


def check_config_round_trip(layer_cls, init_kwargs):
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    json.dumps(config)  # must be JSON-serializable
    restored = layer_cls.from_config(config)
    assert json.dumps(restored.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)
    assert keras.saving.get_registered_name(layer_cls) == f"keras_transformer>{layer_cls.__name__}"
    serialized = keras.saving.serialize_keras_object(layer)
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is layer_cls
    assert json.dumps(revived.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)


def gradients(model, x):
    """Gradients of a fixed random projection of the outputs w.r.t. trainable weights."""
    backend = keras.backend.backend()
    outputs = model(x, training=False)
    projection = np.random.default_rng(1).standard_normal(tuple(outputs.shape)).astype("float32")

    def loss_of(out):
        # `ops.multiply`, not `*`: a PyTorch tensor times a NumPy array goes through NumPy.
        return ops.sum(ops.multiply(ops.cast(out, "float32"), projection))

    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_of(model(x, training=False))
        grads = tape.gradient(loss, [w.value for w in model.trainable_weights])
        # Embedding gradients come as IndexedSlices; densify them.
        return [None if g is None else np.asarray(tf.convert_to_tensor(g)) for g in grads]
    if backend == "jax":
        import jax

        trainable = [w.value for w in model.trainable_weights]
        # Variables, not weights: dropout's seed-generator state counts here too.
        non_trainable = [v.value for v in model.non_trainable_variables]

        def fn(tw):
            out, _ = model.stateless_call(tw, non_trainable, x, training=False)
            return loss_of(out)

        return [np.asarray(g) for g in jax.grad(fn)(trainable)]
    if backend == "torch":
        model.zero_grad()
        loss = loss_of(model(x, training=False))
        loss.backward()
        return [
            None if w.value.grad is None else w.value.grad.cpu().numpy()
            for w in model.trainable_weights
        ]
    raise NotImplementedError(backend)


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    call_kwargs=None,
    run_saving=True,
    run_training=True,
    run_xla=True,
    run_gradients=True,
    run_mixed_precision=True,
    run_quantization=True,
    expected_num_trainable_weights=None,
    zero_gradient_weights=ZERO_GRADIENT_WEIGHTS,
    variant=False,
):
    """`variant=True`: another configuration of a class that a `variant=False` call checks
    in full. It keeps what depends on the configuration (config round trip, shapes, weight
    count, gradients) and leaves out what the class's full check already shows (`.keras`
    saving, XLA, the `fit` step, mixed precision, quantisation)."""
    if variant:
        run_saving = run_xla = run_training = run_mixed_precision = run_quantization = False
    call_kwargs = call_kwargs or {}
    inputs = _as_inputs(input_data)

    check_config_round_trip(layer_cls, init_kwargs)

    # Eager call and shapes.
    layer = layer_cls(**init_kwargs)
    eager = _first(_call(layer, inputs, call_kwargs))
    assert tuple(eager.shape) == tuple(expected_output_shape), (eager.shape, expected_output_shape)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights

    model = _build_model(layer_cls(**init_kwargs), inputs, call_kwargs)
    assert tuple(model.output.shape[1:]) == tuple(expected_output_shape[1:])
    x = _model_inputs(inputs)
    # `convert_to_numpy`, not `np.asarray`: a PyTorch output requires grad.
    reference = ops.convert_to_numpy(model(x, training=False))
    assert np.all(np.isfinite(reference))

    if run_saving:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.keras")
            model.save(path)
            loaded = keras.saving.load_model(path)
        np.testing.assert_array_equal(ops.convert_to_numpy(loaded(x, training=False)), reference)
        for saved, restored in zip(model.weights, loaded.weights):
            assert saved.path == restored.path

    # PyTorch's `jit_compile=True` is `torch.compile` (see the module docstring).
    jit = keras.backend.backend() != "torch"
    if run_xla and jit:
        model.compile(jit_compile=True)
        xla = model.predict(x, batch_size=len(reference), verbose=0)
        np.testing.assert_allclose(xla, reference, rtol=1e-5, atol=1e-5)

    if run_gradients:
        grads = gradients(model, x)
        for weight, grad in zip(model.trainable_weights, grads):
            if any(weight.path.endswith(name) for name in zero_gradient_weights):
                continue
            assert grad is not None, f"{weight.path} gets no gradient"
            assert np.all(np.isfinite(grad)), f"{weight.path} has a non-finite gradient"
            assert np.any(np.abs(grad) > 0), f"{weight.path} gets an all-zero gradient"

    if run_training:
        before = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", jit_compile=jit)
        target = np.random.default_rng(2).standard_normal(reference.shape).astype("float32")
        history = model.fit(x, target, batch_size=len(reference), epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        after = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        assert any(not np.array_equal(b, a) for b, a in zip(before, after))

    if run_mixed_precision:
        for policy, compute_dtype in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
            mixed = layer_cls(**init_kwargs, dtype=policy)
            outputs = _first(_call(mixed, inputs, call_kwargs))
            if "float" in str(reference.dtype):
                assert keras.backend.standardize_dtype(outputs.dtype) == compute_dtype
            values = ops.convert_to_numpy(ops.cast(outputs, "float32"))
            assert np.all(np.isfinite(values)), policy
            for weight in mixed.weights:
                if "float" in weight.dtype:
                    assert weight.dtype == "float32", (weight.path, weight.dtype)

    if run_quantization and layer_cls not in _QUANTIZATION_CHECKED:
        # Once per layer class and process: a few seconds each, and one configuration
        # exercises every projection the class has.
        _QUANTIZATION_CHECKED.add(layer_cls)
        check_quantization_and_lora(model, x)
    return layer


# Quantisation error allowed relative to the outputs' mean magnitude: loose, as layers
# differ; the bug this guards against (integer kernels without their scales) was >1,000x.
_QUANTIZATION_CHECKED = set()
QUANTIZATION_TOLERANCE = {"int8": 0.15, "int4": 0.6, "float8": 0.5}


def _projections(model):
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense))
    ]


def _copy_of(model):
    copy = keras.Model.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy


@contextlib.contextmanager
def without_gc_collect():
    """Keras runs `gc.collect()` for every float kernel `quantize` deletes: ~0.3 s each
    in a test process full of objects, most of a quantisation test's time."""
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect


def check_quantization_and_lora(model, x):
    with without_gc_collect():
        _check_quantization_and_lora(model, x)


def _check_quantization_and_lora(model, x):
    if not _projections(model) and not any(
        isinstance(layer, keras.layers.Embedding) for layer in model._flatten_layers()
    ):
        return
    reference = ops.convert_to_numpy(model(x, training=False))  # the weights after `fit`
    scale = float(np.mean(np.abs(reference))) + 1e-6
    for mode, tolerance in QUANTIZATION_TOLERANCE.items():
        quantized = _copy_of(model)
        quantized.quantize(mode)
        outputs = ops.convert_to_numpy(quantized(x, training=False))
        assert np.all(np.isfinite(outputs)), mode
        error = float(np.max(np.abs(outputs - reference)))
        assert error <= tolerance * scale, (mode, error, scale)
        if mode != "int8":
            continue  # one mode's save and load shows the sub-layers' policies come back
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "quantized.keras")
            quantized.save(path)
            loaded = keras.saving.load_model(path)
        np.testing.assert_array_equal(ops.convert_to_numpy(loaded(x, training=False)), outputs)

    adapted = _copy_of(model)
    projections = _projections(adapted)
    for layer in projections:
        layer.enable_lora(2)
    if projections:
        outputs = ops.convert_to_numpy(adapted(x, training=False))
        np.testing.assert_array_equal(outputs, reference)
