"""`MaskedAccuracy` honours a Keras mask, on predictions known in advance.

`test_respects_keras_mask_in_evaluate` (test_masked_accuracy.py) compares the metric with
NumPy on a randomly initialised model, but nothing there ensures that the masked position
changes the answer: were the model wrong at that position (or everywhere), a metric that
ignored the Keras mask would pass. Its sibling on random logits guards its expectation
(`0.3 < expected < 1.0`); the guard here is by construction: the weights fix every
prediction, the position that only the Keras mask hides is predicted right, so ignoring
the mask gives 5/7 instead of 4/6.
"""

import keras
import numpy as np
import pytest

from keras_transformer.training import MaskedAccuracy

pytestmark = pytest.mark.backend_agnostic

X = np.array([[1, 2, 3, 0], [4, 0, 5, 1]], dtype="int32")
Y = np.array([[2, 3, 4, 0], [5, 1, 2, 3]], dtype="int32")
# The prediction for each input token: position (1, 1), input 0 (masked by the embedding)
# but label 1 (not padding), is predicted right.
PREDICTION_OF_TOKEN = {0: 1, 1: 2, 2: 3, 3: 1, 4: 5, 5: 2}


def _model():
    embedding = keras.layers.Embedding(6, 6, mask_zero=True)
    model = keras.Sequential([keras.Input((4,), dtype="int32"), embedding, keras.layers.Dense(6)])
    table = np.zeros((6, 6), "float32")
    for token, predicted in PREDICTION_OF_TOKEN.items():
        table[token, predicted] = 5.0
    embedding.embeddings.assign(table)
    model.layers[-1].set_weights([np.eye(6, dtype="float32"), np.zeros(6, "float32")])
    return model


def test_keras_mask_changes_the_result_in_evaluate():
    model = _model()
    predicted = np.argmax(keras.ops.convert_to_numpy(model(X)), axis=-1)
    np.testing.assert_array_equal(predicted, np.vectorize(PREDICTION_OF_TOKEN.get)(X))
    right = predicted == Y
    keep = X != 0  # the Keras mask of the embedding
    not_pad = Y != 0  # what `pad_id` alone would count
    assert right[~keep & not_pad].all()  # the guard: the mask hides a right prediction
    assert right[keep].mean() == 4 / 6 and right[not_pad].mean() == 5 / 7

    model.compile(loss="sparse_categorical_crossentropy", metrics=[MaskedAccuracy(pad_id=0)])
    logs = model.evaluate(X, Y, batch_size=2, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["masked_accuracy"], 4 / 6, rtol=1e-6)


def test_without_a_keras_mask_the_pad_id_alone_decides():
    model = _model()
    model.layers[0].mask_zero = False
    model.compile(loss="sparse_categorical_crossentropy", metrics=[MaskedAccuracy(pad_id=0)])
    logs = model.evaluate(X, Y, batch_size=2, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["masked_accuracy"], 5 / 7, rtol=1e-6)
