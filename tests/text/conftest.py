import pytest

from examples.translation.data import load_multi30k
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from tests.no_keras_reset import _fresh_keras_state  # noqa: F401 (overrides the suite-wide one)


@pytest.fixture(scope="module")
def pairs():
    """Multi30k sentence pairs, and below a tokenizer trained on them, made once per module."""
    return load_multi30k("train", limit=2000)


@pytest.fixture(scope="module")
def tokenizer(pairs):
    return SubwordTokenizer.train([s for pair in pairs for s in pair], vocabulary_size=2000)
