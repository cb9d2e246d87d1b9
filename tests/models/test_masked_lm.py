"""`MaskedLM`: BERT's head against NumPy, predictions at mask positions, padding, `build`.

The contract every model keeps (config, `.keras` saving, fit, mixed precision) runs in
`test_model_common.py`, where `MaskedLM` is the `masked_lm` case.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_cases import (
    CASES,
    SOURCE_LENGTH,
    VOCAB,
    compile_model,
    make_masked_lm,
    masked_lm_data,
    predict_logits,
    token_ids,
)

import keras_transformer as kt
from keras_transformer.text.masking import mask_tokens
from keras_transformer.training import LabelSmoothedCrossEntropy, MaskedAccuracy

pytestmark = pytest.mark.backend_agnostic

MASKED_LM = next(case for case in CASES if case.name == "masked_lm")
_erf = np.vectorize(math.erf)


def _gelu(x):
    """Exact GELU, `x Φ(x)` (Keras' default, not the tanh approximation)."""
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _randomise(weights, rng):
    """New values everywhere (the output bias and LayerNorm start as zeros and ones)."""
    for weight in weights:
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype("float32"))


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64")


def _encode(model, ids):
    """Inference-mode encoder states; compiled on JAX (see `predict_logits`)."""
    if keras.backend.backend() == "jax":
        return model.encoder.predict(ids, verbose=0).astype("float64")
    return _numpy(model.encoder(ids, training=False))


def test_head_matches_numpy_from_the_weights(rng):
    model = make_masked_lm(layer_norm_epsilon=1e-3)
    _randomise(model.head_dense.weights + model.head_layer_norm.weights, rng)
    _randomise([model.output_bias], rng)
    ids = token_ids(rng, (3, SOURCE_LENGTH))

    hidden = _encode(model, ids)
    dense = _gelu(hidden @ _numpy(model.head_dense.kernel) + _numpy(model.head_dense.bias))
    normed = _layer_norm(
        dense, _numpy(model.head_layer_norm.gamma), _numpy(model.head_layer_norm.beta), 1e-3
    )
    embeddings = _numpy(model.embedding.token_embedding.embeddings)
    expected = normed @ embeddings.T + _numpy(model.output_bias)

    logits = predict_logits(model, ids)
    assert logits.shape == (3, SOURCE_LENGTH, VOCAB) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)
    # The output projection is the token embedding itself (tied), not a copy.
    assert len([w for w in model.weights if tuple(w.shape) == (VOCAB, 16)]) == 1


def test_logits_at_mask_positions_are_the_full_logits_gathered(rng):
    model = make_masked_lm()
    _randomise([model.output_bias], rng)
    ids = token_ids(rng, (3, SOURCE_LENGTH))
    # Unsorted, repeated, first and last positions all pick the same rows.
    positions = np.array([[0, 6, 3, 3], [5, 1, 0, 0], [2, 2, 2, 4]], "int32")
    full = predict_logits(model, ids)
    gathered = predict_logits(model, {"token_ids": ids, "mask_positions": positions})
    assert gathered.shape == (3, 4, VOCAB)
    np.testing.assert_allclose(
        gathered, np.take_along_axis(full, positions[..., None], axis=1), rtol=1e-5, atol=1e-5
    )
    # The dict form without positions is the plain form.
    np.testing.assert_array_equal(predict_logits(model, {"token_ids": ids}), full)


@pytest.mark.parametrize("pad_id", [0, 5])
def test_padding_does_not_change_the_logits_of_real_tokens(pad_id, rng):
    model = make_masked_lm(pad_id=pad_id)
    ids = token_ids(rng, (3, SOURCE_LENGTH), pad_id)
    padded = np.pad(ids, ((0, 0), (0, 5)), constant_values=pad_id)
    full = predict_logits(model, padded)
    np.testing.assert_allclose(
        full[:, :SOURCE_LENGTH], predict_logits(model, ids), rtol=1e-5, atol=1e-5
    )
    positions = np.array([[1, 4], [0, 6], [3, 3]], "int32")
    np.testing.assert_allclose(
        predict_logits(model, {"token_ids": padded, "mask_positions": positions}),
        predict_logits(model, {"token_ids": ids, "mask_positions": positions}),
        rtol=1e-5,
        atol=1e-5,
    )
    # The padding is masked, not ignored by accident: a real token there changes things.
    changed = padded.copy()
    changed[:, -1] = (pad_id + 1) % VOCAB
    assert not np.allclose(
        predict_logits(model, changed)[:, :SOURCE_LENGTH], full[:, :SOURCE_LENGTH]
    )


# Keras's `jit_compile=True` is `torch.compile` on PyTorch, which Keras calls experimental
# and `choose_jit_compile` never turns on there; this test took 80-100 s on the 2-core CI
# with it (each of the two such tests about a fifth of the whole PyTorch run).
@pytest.mark.skipif(
    keras.backend.backend() == "torch", reason="torch.compile: experimental in Keras, unused here"
)
def test_jit_compiled_fit_step_moves_every_weight(rng):
    model = make_masked_lm()
    compile_model(model, MASKED_LM, jit_compile=True)
    x, y = masked_lm_data(rng)
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [np.array(w) for w in model.trainable_weights]
    unchanged = [
        w.path for w, b, a in zip(model.trainable_weights, before, after) if np.array_equal(b, a)
    ]
    assert not unchanged, unchanged


def test_build_compiles_a_loss_that_ignores_label_zero(rng):
    model = kt.models.build("masked_lm", preset="tiny", vocabulary_size=VOCAB, precision="float32")
    assert isinstance(model, kt.models.MaskedLM)
    assert (model.num_layers, model.hidden_dim) == (2, 128)
    assert isinstance(model.loss, LabelSmoothedCrossEntropy)
    assert model.loss.label_smoothing == 0.0 and model.loss.pad_id == 0
    metric = model._compile_metrics._user_metrics[0]
    assert isinstance(metric, MaskedAccuracy) and metric.pad_id == 0

    x, _ = masked_lm_data(rng, batch=2, num_predictions=3)
    x["mask_positions"] = np.array([[1, 2, 3], [2, 4, 6]], "int32")
    logits = predict_logits(model, x).astype("float64")
    log_softmax = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    labels = np.zeros((2, 3), "int32")
    labels[1, 2] = 7
    loss = float(keras.ops.convert_to_numpy(model.loss(labels, logits.astype("float32"))))
    np.testing.assert_allclose(loss, -log_softmax[1, 2, 7], rtol=1e-5)
    # Two labelled slots: their mean, whatever the other logits.
    labels[0, 0] = 11
    loss = float(keras.ops.convert_to_numpy(model.loss(labels, logits.astype("float32"))))
    np.testing.assert_allclose(loss, -(log_softmax[1, 2, 7] + log_softmax[0, 0, 11]) / 2, rtol=1e-5)


def _two_halves(rng, rows, length=16):
    """Rows `[start, a × 8, b × 8, end]` of two random distinct regular ids `a`, `b`.

    A masked token is the id of its half: a model that sees only which ids the row
    holds gets half of them right; one that also uses positions gets all.
    """
    regular = np.arange(5, VOCAB)
    a = rng.choice(regular, rows)
    b = regular[(np.searchsorted(regular, a) + rng.integers(1, len(regular), rows)) % len(regular)]
    body = np.concatenate(
        [np.repeat(a[:, None], length // 2, 1), np.repeat(b[:, None], length // 2, 1)], 1
    )
    return np.concatenate([np.full((rows, 1), 2), body, np.full((rows, 1), 3)], 1).astype("int32")


# A learning run (80 steps), among the slow tests; the default run's exact learning check is
# `test_fast_copy_task.py`.
@pytest.mark.slow
def test_a_short_fit_learns_a_masked_task_well_above_chance(rng):
    # Dropout off and a gentle, short schedule: 80 steps of the tiny preset (~4 s).
    model = kt.models.build(
        "masked_lm",
        preset="tiny",
        vocabulary_size=VOCAB,
        precision="float32",
        dropout=0.0,
        warmup_steps=30,
        learning_rate_scale=0.2,
    )
    rows = tf.data.Dataset.from_tensor_slices(_two_halves(rng, 2048)).repeat().batch(32)
    seeds = tf.data.Dataset.random(seed=1).batch(2)
    train = tf.data.Dataset.zip(rows, seeds).map(
        lambda ids, seed: mask_tokens(ids, 4, VOCAB, seed=seed, max_predictions=3)
    )
    x, y = mask_tokens(_two_halves(np.random.default_rng(5), 512), 4, VOCAB, seed=(3, 4))
    x, y = {k: v.numpy() for k, v in x.items()}, y.numpy()

    def accuracy():
        predicted = predict_logits(model, x).argmax(axis=-1)
        return np.mean(predicted[y != 0] == y[y != 0])

    assert accuracy() < 0.2  # chance: 1 / 18 regular ids
    model.fit(train, steps_per_epoch=80, epochs=1, verbose=0)
    # Measured 0.96 (TensorFlow) and 0.93 (JAX); ids alone, without positions, give 0.5.
    assert accuracy() > 0.85
