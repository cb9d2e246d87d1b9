"""A do-nothing `_fresh_keras_state`, for the test folders whose conftest.py imports it."""

import pytest


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Overrides the suite-wide fixture: these tests build no Keras objects, and its
    `keras.backend.clear_session()` (a full `gc.collect()`, ~0.6 s) doubled their run time.
    `test_tokenizer_survives_clear_session` covers the interaction explicitly."""
    yield
