import keras
import numpy as np
import pytest

from keras_transformer.training import MaskedAccuracy
from tests.harness import check_config_round_trip

pytestmark = pytest.mark.backend_agnostic


def scores_for(predicted, vocab_size=5):
    """One-hot scores whose arg-max is `predicted`."""
    return np.eye(vocab_size, dtype="float32")[np.asarray(predicted)]


def test_counts_non_pad_tokens_across_batches():
    metric = MaskedAccuracy(pad_id=0)
    # Batch 1: 3 real tokens, 2 right. The pads are "predicted" correctly too,
    # so counting them would give 5/6 instead of 2/3.
    metric.update_state([[1, 2, 0], [3, 0, 0]], scores_for([[1, 4, 0], [3, 0, 0]]))
    np.testing.assert_allclose(float(metric.result()), 2 / 3, rtol=1e-6)
    # Batch 2: 3 real tokens, 1 right; the total is token-weighted: 3 / 6.
    metric.update_state([[2, 2, 2]], scores_for([[2, 1, 1]]))
    np.testing.assert_allclose(float(metric.result()), 0.5, rtol=1e-6)
    assert float(metric.count) == 6.0 and float(metric.correct) == 3.0

    metric.reset_state()
    assert float(metric.result()) == 0.0 and float(metric.count) == 0.0
    metric.update_state([[4, 0]], scores_for([[4, 1]]))
    assert float(metric.result()) == 1.0


def test_pad_id_none_counts_every_token():
    metric = MaskedAccuracy(pad_id=None)
    metric.update_state([[1, 2, 0], [3, 0, 0]], scores_for([[1, 4, 0], [3, 0, 1]]))
    np.testing.assert_allclose(float(metric.result()), 4 / 6, rtol=1e-6)


def test_sample_weight_per_sequence():
    metric = MaskedAccuracy(pad_id=0)
    # Row 0: 1 of 2 right, weight 3. Row 1: 1 of 1 right, weight 1. (3 + 1) / (6 + 1).
    metric.update_state(
        [[1, 2, 0], [3, 0, 0]],
        scores_for([[1, 4, 0], [3, 0, 0]]),
        sample_weight=np.array([3.0, 1.0]),
    )
    np.testing.assert_allclose(float(metric.result()), 4 / 7, rtol=1e-6)


def test_matches_numpy_arg_max_on_random_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 7, 50)).astype("float32")
    labels = rng.integers(0, 50, size=(4, 7))
    # Make about half the tokens right, and some of them padding.
    labels[:, ::2] = np.argmax(logits, axis=-1)[:, ::2]
    labels[:, 5:] = 0
    metric = MaskedAccuracy(pad_id=0)
    metric.update_state(labels, logits)
    keep = labels != 0
    expected = (np.argmax(logits, axis=-1) == labels)[keep].mean()
    assert 0.3 < expected < 1.0
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6)


def test_a_tie_goes_to_the_lowest_id_like_an_arg_max():
    metric = MaskedAccuracy(pad_id=None)
    scores = np.array(
        [[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.2, 0.4, 0.4], [0.2, 0.4, 0.4], [0.2, 0.4, 0.4]]],
        dtype="float32",
    )
    labels = [[0, 1, 1, 2, 0]]
    metric.update_state(labels, scores)
    assert (np.argmax(scores, axis=-1) == labels).tolist() == [[True, False, True, False, False]]
    np.testing.assert_allclose(float(metric.result()), 2 / 5, rtol=1e-6)


def test_matches_numpy_arg_max_on_tied_bfloat16_scores():
    rng = np.random.default_rng(1)
    # Rounded to a coarse grid, so many rows tie for the best score.
    scores = np.round(rng.normal(size=(8, 16, 40)) * 2).astype("float32")
    labels = rng.integers(1, 40, size=(8, 16))
    best = scores.max(axis=-1, keepdims=True)
    tied = [np.flatnonzero(row == top) for row, top in zip(scores.reshape(-1, 40), best.ravel())]
    # Point half the labels at a (possibly not the first) best id.
    flat = labels.reshape(-1)
    flat[::2] = [ids[-1] for ids in tied[::2]]
    assert sum(len(ids) > 1 for ids in tied) > 20
    metric = MaskedAccuracy(pad_id=None)
    metric.update_state(labels, keras.ops.cast(scores, "bfloat16"))
    expected = (np.argmax(scores, axis=-1) == labels).mean()
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6)


def test_pad_id_outside_the_vocabulary():
    # PyTorch-style -100 padding: skipped with pad_id=-100, never right with pad_id=None.
    labels = [[1, 2, -100], [3, -100, -100]]
    scores = scores_for([[1, 4, 0], [3, 0, 0]])
    metric = MaskedAccuracy(pad_id=-100)
    metric.update_state(labels, scores)
    np.testing.assert_allclose(float(metric.result()), 2 / 3, rtol=1e-6)
    metric = MaskedAccuracy(pad_id=None)
    metric.update_state(labels, scores)
    np.testing.assert_allclose(float(metric.result()), 2 / 6, rtol=1e-6)


def test_labels_with_trailing_axis():
    metric = MaskedAccuracy(pad_id=0)
    metric.update_state(np.array([[[1], [2], [0]]]), scores_for([[1, 3, 2]]))
    np.testing.assert_allclose(float(metric.result()), 0.5, rtol=1e-6)


def test_respects_keras_mask_in_evaluate():
    # The input mask drops position 1 of row 1 although its label is not padding.
    x = np.array([[1, 2, 3, 0], [4, 0, 5, 1]], dtype="int32")
    y = np.array([[2, 3, 4, 0], [5, 1, 2, 3]], dtype="int32")
    keep = np.array([[1, 1, 1, 0], [1, 0, 1, 1]], dtype=bool)
    model = keras.Sequential(
        [
            keras.Input((4,), dtype="int32"),
            keras.layers.Embedding(6, 8, mask_zero=True),
            keras.layers.Dense(6),
        ]
    )
    # `convert_to_numpy`, not `np.asarray`: a PyTorch result requires grad.
    predicted = np.argmax(keras.ops.convert_to_numpy(model(x)), axis=-1)
    expected = (predicted == y)[keep].mean()
    model.compile(loss="sparse_categorical_crossentropy", metrics=[MaskedAccuracy(pad_id=0)])
    logs = model.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["masked_accuracy"], expected, rtol=1e-6)


def test_config_round_trip():
    check_config_round_trip(MaskedAccuracy, {"pad_id": 3, "name": "token_accuracy"})
    assert MaskedAccuracy().get_config() == {
        "name": "masked_accuracy",
        "dtype": "float32",
        "pad_id": 0,
    }


@pytest.mark.parametrize("pad_id", [0.5, "0", True])
def test_bad_pad_id(pad_id):
    with pytest.raises(ValueError, match="`pad_id` must be an integer"):
        MaskedAccuracy(pad_id=pad_id)
