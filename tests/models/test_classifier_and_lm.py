"""`TransformerClassifier` pooling and encoder transfer; `TransformerLM` causality."""

import os

import numpy as np
import pytest
from keras import ops
from model_cases import (
    TARGET_LENGTH,
    VOCAB,
    classifier_data,
    lm_data,
    make_classifier,
    make_lm,
    predict_logits,
    token_ids,
)

pytestmark = pytest.mark.backend_agnostic


@pytest.mark.parametrize("pad_id", [0, 5])
def test_mean_pooling_ignores_padding(pad_id, rng):
    model = make_classifier(pooling="mean", pad_id=pad_id)
    x, _ = classifier_data(rng, batch=3, pad_id=pad_id)
    ids = x["token_ids"]
    expected = predict_logits(model, ids)
    padded = np.pad(ids, ((0, 0), (0, 6)), constant_values=pad_id)
    np.testing.assert_allclose(predict_logits(model, padded), expected, rtol=1e-5, atol=1e-5)
    # The dict input form gives the same logits.
    np.testing.assert_array_equal(predict_logits(model, {"token_ids": ids}), expected)


def test_cls_pooling_reads_position_zero(rng):
    model = make_classifier(pooling="cls")
    ids = classifier_data(rng, batch=3)[0]["token_ids"]
    hidden = model.encoder(ids, training=False)
    by_hand = ops.convert_to_numpy(model.classifier_head(hidden[:, 0]))
    np.testing.assert_allclose(predict_logits(model, ids), by_hand, rtol=1e-6, atol=1e-6)
    # Mean pooling of the same encoder differs: the pooling really is position 0.
    mean_pooled = ops.convert_to_numpy(model.classifier_head(ops.mean(hidden, axis=1)))
    assert not np.allclose(by_hand, mean_pooled, atol=1e-4)


def test_encoder_weights_transfer_to_a_new_classifier(rng, tmp_path):
    """Fine-tuning: pretrained encoder weights load into a classifier with another head."""
    pretrained = make_classifier(num_classes=3)
    ids = classifier_data(rng, batch=3)[0]["token_ids"]
    path = os.path.join(tmp_path, "encoder.weights.h5")
    pretrained.encoder.save_weights(path)

    fine_tuned = make_classifier(num_classes=5)
    before = ops.convert_to_numpy(fine_tuned.encoder(ids, training=False))
    fine_tuned.encoder.load_weights(path)
    after = ops.convert_to_numpy(fine_tuned.encoder(ids, training=False))

    np.testing.assert_array_equal(
        after, ops.convert_to_numpy(pretrained.encoder(ids, training=False))
    )
    assert not np.allclose(before, after)
    assert predict_logits(fine_tuned, ids).shape == (3, 5)


def test_lm_is_causal(rng):
    model = make_lm()
    ids = lm_data(rng, batch=2)[0]["token_ids"]
    logits = predict_logits(model, ids)
    assert logits.shape == (2, TARGET_LENGTH, VOCAB)
    for t in range(TARGET_LENGTH - 1):
        changed = ids.copy()
        changed[:, t + 1 :] = token_ids(rng, (2, TARGET_LENGTH - t - 1))
        np.testing.assert_allclose(
            predict_logits(model, changed)[:, : t + 1], logits[:, : t + 1], rtol=1e-5, atol=1e-5
        )
