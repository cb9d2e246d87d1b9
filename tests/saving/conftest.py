import pytest

from tests.saving.saving_helpers import train_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    """The saving tests' tokenizer (saving_helpers' corpus), trained once per module."""
    return train_tokenizer()
