"""`TransformerClassifier` pooling by value: the mean of the encoder outputs over real tokens.

`test_mean_pooling_ignores_padding` shows that padding does not change the logits, which a
sum or a max over real tokens would also satisfy; here the pooled vector is pinned to the
NumPy mean of the encoder outputs over the non-pad positions, for the `pooling` modes
the classifier has (`"mean"`, `"cls"`, `"pooler"`).
"""

import numpy as np
import pytest
from keras import ops
from model_cases import make_classifier, predict_logits

from keras_transformer.models.transformer_classifier import POOLINGS

pytestmark = pytest.mark.backend_agnostic


def _ids(pad_id):
    """Rows with 7, 4 and 1 real tokens; row 1 also has a pad token in the middle."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 20, (3, 7)).astype("int32")
    ids[ids == pad_id] = pad_id + 1
    ids[1, 4:] = pad_id
    ids[1, 2] = pad_id
    ids[2, 1:] = pad_id
    return ids


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(x), np.float64)


def test_the_classifier_has_these_pooling_modes():
    assert set(POOLINGS) == {"mean", "cls", "pooler"}  # a new mode needs a value test below


@pytest.mark.parametrize("pad_id", [0, 5])
def test_mean_pooling_is_the_mean_over_real_tokens(pad_id):
    model = make_classifier(pooling="mean", pad_id=pad_id, dropout=0.0)
    ids = _ids(pad_id)
    real = ids != pad_id
    encoded = model.encoder(ids, training=False)
    hidden = _numpy(encoded)
    expected = np.stack([hidden[b][real[b]].mean(axis=0) for b in range(len(ids))])

    np.testing.assert_allclose(_numpy(model.pool(encoded, ids)), expected, rtol=1e-6, atol=1e-6)
    head = model.classifier_head
    kernel, bias = _numpy(head.kernel), _numpy(head.bias)
    np.testing.assert_allclose(
        predict_logits(model, ids), expected @ kernel + bias, rtol=1e-5, atol=1e-5
    )
    # The value is discriminating: a sum, a max or a mean over all positions differs.
    for wrong in (
        np.stack([hidden[b][real[b]].sum(axis=0) for b in range(len(ids))]),
        np.stack([hidden[b][real[b]].max(axis=0) for b in range(len(ids))]),
        hidden.mean(axis=1),
    ):
        assert np.abs(wrong[:2] - expected[:2]).max() > 0.1


def test_mean_pooling_of_a_row_without_tokens_is_zero():
    model = make_classifier(pooling="mean", dropout=0.0)
    ids = np.array([[3, 4, 0], [0, 0, 0]], "int32")
    encoded = model.encoder(ids, training=False)
    hidden = _numpy(encoded)
    pooled = _numpy(model.pool(encoded, ids))
    np.testing.assert_array_equal(pooled[1], 0.0)  # no NaN from 0 / 0
    np.testing.assert_allclose(pooled[0], hidden[0, :2].mean(axis=0), rtol=1e-6, atol=1e-6)


def test_cls_pooling_is_the_first_position_even_when_padding_follows():
    model = make_classifier(pooling="cls", dropout=0.0)
    ids = _ids(0)
    encoded = model.encoder(ids, training=False)
    np.testing.assert_array_equal(_numpy(model.pool(encoded, ids)), _numpy(encoded)[:, 0])


def test_pooler_pooling_is_tanh_of_a_dense_layer_on_the_first_position():
    model = make_classifier(pooling="pooler", dropout=0.0)
    ids = _ids(0)
    encoded = model.encoder(ids, training=False)
    kernel, bias = _numpy(model.pooler_dense.kernel), _numpy(model.pooler_dense.bias)
    expected = np.tanh(_numpy(encoded)[:, 0] @ kernel + bias)
    np.testing.assert_allclose(_numpy(model.pool(encoded, ids)), expected, rtol=1e-5, atol=1e-5)
