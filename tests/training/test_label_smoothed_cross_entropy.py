import keras
import numpy as np
import pytest

from keras_transformer.training import LabelSmoothedCrossEntropy
from tests.harness import check_config_round_trip

pytestmark = pytest.mark.backend_agnostic


def reference_losses(labels, logits, label_smoothing):
    """Per-token cross-entropy against (1 - ε) onehot + ε / V, in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    vocab_size = logits.shape[-1]
    safe = np.clip(labels, 0, vocab_size - 1)
    target = (1 - label_smoothing) * np.eye(vocab_size)[safe] + label_smoothing / vocab_size
    return -(target * log_probs).sum(-1)


def reference_mean(labels, logits, label_smoothing, pad_id):
    losses = reference_losses(labels, logits, label_smoothing)
    keep = np.ones(labels.shape, bool) if pad_id is None else labels != pad_id
    return losses[keep].mean()


@pytest.fixture
def batch(rng):
    labels = np.array([[3, 1, 4, 0, 0], [2, 6, 5, 1, 0]], dtype="int32")
    logits = rng.standard_normal((2, 5, 7)).astype("float32") * 3
    return labels, logits


def test_hand_computed_single_token():
    # p = softmax([ln 3, 0]) = [0.75, 0.25]; ε = 0.2, V = 2: target = [0.9, 0.1];
    # loss = -0.9 ln 0.75 - 0.1 ln 0.25 = 0.258913865 + 0.138629436.
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.2, pad_id=None)
    value = loss(np.array([[0]]), np.array([[[np.log(3.0), 0.0]]], dtype="float32"))
    np.testing.assert_allclose(float(value), 0.397543301, rtol=1e-6)


def test_hand_computed_probabilities_with_padding():
    # Token 1: label 2, p = [0.2, 0.3, 0.5]; token 2 is padding (label 0).
    # ε = 0.3, V = 3: target = [0.1, 0.1, 0.8];
    # loss = -(0.1 ln 0.2 + 0.1 ln 0.3 + 0.8 ln 0.5) = 0.16094379 + 0.12039728 + 0.55451774.
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.3, pad_id=0, from_logits=False)
    probs = np.array([[[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]]], dtype="float32")
    np.testing.assert_allclose(float(loss(np.array([[2, 0]]), probs)), 0.83585881, rtol=1e-6)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 0.5])
def test_matches_numpy_with_padding(batch, label_smoothing):
    labels, logits = batch
    loss = LabelSmoothedCrossEntropy(label_smoothing=label_smoothing, pad_id=0)
    expected = reference_mean(labels, logits, label_smoothing, pad_id=0)
    np.testing.assert_allclose(float(loss(labels, logits)), expected, rtol=1e-5)


def test_matches_numpy_without_masking(batch):
    labels, logits = batch
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=None)
    expected = reference_mean(labels, logits, 0.1, pad_id=None)
    np.testing.assert_allclose(float(loss(labels, logits)), expected, rtol=1e-5)
    # Masking must matter on this batch, or the padded tests above prove nothing.
    assert abs(expected - reference_mean(labels, logits, 0.1, pad_id=0)) > 1e-3


def test_padding_does_not_change_the_loss(batch, rng):
    labels, logits = batch
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=0)
    padded_labels = np.concatenate([labels, np.zeros((2, 4), "int32")], axis=1)
    padded_logits = np.concatenate(
        [logits, 50 * rng.standard_normal((2, 4, 7)).astype("float32")], axis=1
    )
    np.testing.assert_allclose(
        float(loss(padded_labels, padded_logits)), float(loss(labels, logits)), rtol=1e-6
    )


def test_out_of_vocabulary_pad_id(batch):
    labels, logits = batch
    labels = np.where(labels == 0, -100, labels)
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=-100)
    expected = reference_mean(labels, logits, 0.1, pad_id=-100)
    np.testing.assert_allclose(float(loss(labels, logits)), expected, rtol=1e-5)


def test_zero_probability_at_padding_stays_finite():
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=0, from_logits=False)
    probs = np.array([[[0.25, 0.75], [0.0, 0.0]]], dtype="float32")
    value = float(loss(np.array([[1, 0]]), probs))
    expected = -(0.9 + 0.05) * np.log(0.75) - 0.05 * np.log(0.25)
    np.testing.assert_allclose(value, expected, rtol=1e-6)


def test_no_smoothing_ignores_a_masked_out_class():
    # A class with logit -inf has log-probability -inf; without smoothing it
    # carries no target mass and must not turn the loss into NaN (0 * -inf).
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.0, pad_id=None)
    logits = np.array([[[1.0, 2.0, -np.inf]]], dtype="float32")
    value = float(loss(np.array([[1]]), logits))
    expected = -(2.0 - np.log(np.exp(1.0) + np.exp(2.0)))
    np.testing.assert_allclose(value, expected, rtol=1e-6)


def test_all_padding_gives_zero():
    loss = LabelSmoothedCrossEntropy(pad_id=0)
    value = loss(np.zeros((2, 3), "int32"), np.ones((2, 3, 4), "float32"))
    assert float(value) == 0.0


@pytest.mark.parametrize("from_logits", [True, False])
def test_no_smoothing_equals_sparse_categorical_crossentropy(batch, from_logits):
    labels, logits = batch
    y_pred = logits if from_logits else np.asarray(keras.ops.softmax(logits))
    ours = LabelSmoothedCrossEntropy(label_smoothing=0.0, pad_id=None, from_logits=from_logits)
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)
    np.testing.assert_allclose(
        float(ours(labels, y_pred)), float(keras_loss(labels, y_pred)), rtol=1e-5
    )


def test_reductions_and_sample_weight(batch):
    labels, logits = batch
    per_token = reference_losses(labels, logits, 0.1) * (labels != 0)
    none = LabelSmoothedCrossEntropy(pad_id=0, reduction=None)(labels, logits)
    assert tuple(none.shape) == (2, 5)
    np.testing.assert_allclose(np.asarray(none), per_token, rtol=1e-5, atol=1e-6)
    total = LabelSmoothedCrossEntropy(pad_id=0, reduction="sum")(labels, logits)
    np.testing.assert_allclose(float(total), per_token.sum(), rtol=1e-5)

    # Per-sequence weights scale each row; the mean still divides by the 7 real tokens.
    weights = np.array([2.0, 0.5], dtype="float32")
    weighted = LabelSmoothedCrossEntropy(pad_id=0)(labels, logits, sample_weight=weights)
    expected = (2.0 * per_token[0].sum() + 0.5 * per_token[1].sum()) / 7
    np.testing.assert_allclose(float(weighted), expected, rtol=1e-5)
    by_weight = LabelSmoothedCrossEntropy(pad_id=0, reduction="mean_with_sample_weight")
    expected = (2.0 * per_token[0].sum() + 0.5 * per_token[1].sum()) / (2.0 * 3 + 0.5 * 4)
    np.testing.assert_allclose(
        float(by_weight(labels, logits, sample_weight=weights)), expected, rtol=1e-5
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_logits_are_reduced_in_float32(batch, dtype):
    labels, logits = batch
    # Large logits: a 16-bit log-softmax would be off by ~1e-3 relative here.
    low = keras.ops.cast(logits * 300, dtype)
    value = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=0)(labels, low)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    assert np.isfinite(float(value))
    rounded = np.asarray(keras.ops.cast(low, "float32"))
    expected = reference_mean(labels, rounded, 0.1, pad_id=0)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)


def _masked_model(vocab_size=6):
    model = keras.Sequential(
        [
            keras.Input((4,), dtype="int32"),
            keras.layers.Embedding(vocab_size, 8, mask_zero=True),
            keras.layers.Dense(vocab_size),
        ]
    )
    return model


def test_fit_with_keras_mask_counts_each_token_once():
    # Row 0: the input mask and the label padding agree. Row 1 disagrees: the
    # input masks position 1 and the labels pad position 2, so only positions
    # 0 and 3 survive the AND.
    x = np.array([[1, 2, 3, 0], [4, 0, 5, 1]], dtype="int32")
    y = np.array([[2, 3, 4, 0], [5, 1, 0, 3]], dtype="int32")
    keep = np.array([[1, 1, 1, 0], [1, 0, 0, 1]], dtype=bool)
    model = _masked_model()
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=0)
    # NumPy (through `convert_to_numpy`, which also detaches a PyTorch result that
    # requires grad): the Keras mask is dropped here.
    logits = keras.ops.convert_to_numpy(model(x))
    expected = reference_losses(y, logits, 0.1)[keep].mean()
    direct = loss(y[keep][None], logits[keep][None])
    np.testing.assert_allclose(float(direct), expected, rtol=1e-5)

    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
    history = model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["loss"][0], expected, rtol=1e-5)


def test_fit_with_keras_mask_and_sequence_weights():
    # Per-sequence weights meet the Keras mask (and the label padding) of a
    # `(batch, length)` loss: Keras merges them in place, which PyTorch refused
    # for `(batch, 1)` weights.
    x = np.array([[1, 2, 3, 0], [4, 0, 5, 1]], dtype="int32")
    y = np.array([[2, 3, 4, 0], [5, 1, 0, 3]], dtype="int32")
    weights = np.array([2.0, 0.5], dtype="float32")
    model = _masked_model()
    per_token = reference_losses(y, keras.ops.convert_to_numpy(model(x)), 0.1) * weights[:, None]
    # pad_id=None counts the label 0 at row 1, position 2, which the input does not mask.
    for pad_id, keep in [(0, [[1, 1, 1, 0], [1, 0, 0, 1]]), (None, [[1, 1, 1, 0], [1, 0, 1, 1]])]:
        keep = np.array(keep, dtype=bool)
        loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=pad_id)
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
        history = model.fit(
            x, y, sample_weight=weights, batch_size=2, epochs=1, shuffle=False, verbose=0
        )
        expected = per_token[keep].sum() / keep.sum()
        np.testing.assert_allclose(history.history["loss"][0], expected, rtol=1e-5)


def test_config_round_trip():
    check_config_round_trip(
        LabelSmoothedCrossEntropy,
        {
            "label_smoothing": 0.2,
            "pad_id": -100,
            "from_logits": False,
            "reduction": "sum",
            "name": "smoothed",
        },
    )
    assert LabelSmoothedCrossEntropy().get_config() == {
        "name": "label_smoothed_cross_entropy",
        "reduction": "sum_over_batch_size",
        "label_smoothing": 0.1,
        "pad_id": 0,
        "from_logits": True,
    }
    revived = keras.losses.deserialize(keras.losses.serialize(LabelSmoothedCrossEntropy(0.3)))
    assert isinstance(revived, LabelSmoothedCrossEntropy) and revived.label_smoothing == 0.3


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"label_smoothing": 1.0}, "label_smoothing"),
        ({"label_smoothing": -0.1}, "label_smoothing"),
        ({"label_smoothing": "0.1"}, "label_smoothing"),
        ({"pad_id": 0.5}, "pad_id"),
        ({"pad_id": True}, "pad_id"),
        ({"from_logits": 1}, "from_logits"),
        ({"reduction": "average"}, "reduction"),
    ],
)
def test_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        LabelSmoothedCrossEntropy(**kwargs)


def test_dense_labels_are_rejected():
    loss = LabelSmoothedCrossEntropy()
    with pytest.raises(ValueError, match="`y_true` must hold sparse integer labels"):
        loss(np.zeros((2, 3, 4, 5), "float32"), np.zeros((2, 3, 4), "float32"))
