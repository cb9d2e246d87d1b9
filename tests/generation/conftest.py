import pytest
from generation_helpers import tiny_lm, tiny_seq2seq


@pytest.fixture(scope="session")
def seq2seq_model():
    """Shared and never modified, so tests that use it also share its compiled functions."""
    return tiny_seq2seq()


@pytest.fixture(scope="session")
def lm_model():
    return tiny_lm()
