"""The private Keras and tensorflow-text hooks in `compat.py` still exist and still work.

If a release moves one, these fail by name, instead of the package falling back quietly.
"""

import keras
import numpy as np
import pytest

from keras_transformer import compat


@pytest.mark.backend_agnostic
def test_keras_mask_helpers_are_found_and_round_trip():
    assert compat.keras_mask_helpers_found(), "keras.src.backend.get/set_keras_mask moved"
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(np.array([[3, 5, 0]]))
    mask = compat.get_keras_mask(embedded)
    assert keras.ops.convert_to_numpy(mask).tolist() == [[True, True, False]]
    tensor = keras.ops.ones((1, 3))
    compat.set_keras_mask(tensor, mask)
    assert compat.get_keras_mask(tensor) is mask


def test_sentencepiece_resource_is_replaced_and_survives_clear_session():
    import tensorflow as tf
    import tensorflow_text as tf_text

    from keras_transformer.text import SubwordTokenizer

    proto = SubwordTokenizer.train(["a man in a blue shirt."] * 20, vocabulary_size=280).model_proto
    tokenizer = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.int32)
    assert compat.share_sentencepiece_resource(tokenizer, proto), "tensorflow-text's layout moved"
    before = tokenizer.tokenize(["a blue man."]).to_list()
    keras.backend.clear_session()
    assert tokenizer.tokenize(["a blue man."]).to_list() == before
