import pytest

from examples.translation.data import load_multi30k
from keras_transformer.text.subword_tokenizer import SubwordTokenizer


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Overrides the suite-wide fixture: these tests build no Keras objects, and its
    `keras.backend.clear_session()` (a full `gc.collect()`, ~0.6 s) doubled their run time.
    `test_tokenizer_survives_clear_session` covers the interaction explicitly."""
    yield


@pytest.fixture(scope="module")
def pairs():
    """Multi30k sentence pairs, and below a tokenizer trained on them, made once per module."""
    return load_multi30k("train", limit=2000)


@pytest.fixture(scope="module")
def tokenizer(pairs):
    return SubwordTokenizer.train([s for pair in pairs for s in pair], vocabulary_size=2000)
