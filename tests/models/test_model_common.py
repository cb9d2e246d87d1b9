"""What every model must do: serialise, save and reload, train, and run in mixed precision."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_cases import BY_NAME, EAGER_STEP, compile_model, predict_logits

pytestmark = pytest.mark.backend_agnostic


@BY_NAME
def test_config_json_round_trip(case):
    model = case.make(dropout=0.2, name="m")
    config = model.get_config()
    text = json.dumps(config)  # must be JSON-serializable
    restored = type(model).from_config(json.loads(text))
    assert json.dumps(restored.get_config(), sort_keys=True) == json.dumps(config, sort_keys=True)
    assert keras.saving.get_registered_name(type(model)) == (
        f"keras_transformer>{type(model).__name__}"
    )
    assert len(restored.weights) == len(model.weights)


@BY_NAME
def test_keras_save_and_load_without_custom_objects(case, rng, tmp_path):
    model = case.make()
    x, _ = case.data(rng)
    compile_model(model, case)
    # New values everywhere, as after training, without paying for a compiled train step.
    for variable in model.weights + model.optimizer.variables:
        if "float" in variable.dtype:
            variable.assign(rng.normal(0.0, 0.1, variable.shape).astype(variable.dtype))
    model.optimizer.iterations.assign(7)
    expected = predict_logits(model, x)

    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)

    assert type(loaded) is type(model)
    np.testing.assert_array_equal(predict_logits(loaded, x), expected)
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    # The compile state comes back too, so training resumes where it stopped.
    assert type(loaded.loss) is type(model.loss)
    assert int(loaded.optimizer.iterations) == 7
    for saved, restored in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(restored), np.asarray(saved))


@BY_NAME
def test_fit_evaluate_predict_on_arrays_and_tf_data(case, rng):
    model = case.make()
    compile_model(model, case)
    x, y = case.data(rng, batch=16)

    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    results = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    assert np.isfinite(results["loss"])
    predictions = model.predict(x, batch_size=8, verbose=0)
    logits = predict_logits(model, x)
    assert predictions.shape == logits.shape and predictions.dtype == np.float32
    np.testing.assert_allclose(predictions, logits, rtol=1e-5, atol=1e-5)

    # Full batches only: the static batch size then matches what `fit` makes of the arrays,
    # and TensorFlow reuses the traced steps instead of tracing them again.
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
    history = model.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    dataset_results = model.evaluate(dataset, verbose=0, return_dict=True)
    assert np.isfinite(dataset_results["loss"])
    from_dataset = model.predict(dataset.map(lambda features, labels: features), verbose=0)
    np.testing.assert_allclose(from_dataset, predict_logits(model, x), rtol=1e-5, atol=1e-5)


@BY_NAME
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_logits_are_float32_and_training_is_finite(case, policy, rng):
    model = case.make(dtype=policy)
    x, y = case.data(rng)
    # `predict`, not an eager call: eager JAX compiles every op anew for 16-bit dtypes.
    logits = model.predict(x, verbose=0)
    assert logits.dtype == np.float32 and np.all(np.isfinite(logits))
    assert all(w.dtype == "float32" for w in model.weights if "float" in w.dtype)

    optimizer = keras.optimizers.Adam(1e-3)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    # Graph-mode training is covered above; see `EAGER_STEP`.
    compile_model(model, case, optimizer, run_eagerly=EAGER_STEP)
    before = [np.array(w) for w in model.trainable_weights]
    loss = model.train_on_batch(x, y, return_dict=True)["loss"]
    assert np.isfinite(loss)
    after = [np.array(w) for w in model.trainable_weights]
    assert all(np.all(np.isfinite(w)) for w in after)
    if policy == "mixed_bfloat16":
        # A float16 first step may be skipped while the loss scale settles; bf16 never is.
        assert any(not np.array_equal(b, a) for b, a in zip(before, after))
