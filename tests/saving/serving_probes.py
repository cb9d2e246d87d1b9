"""Calling an exported SavedModel on odd inputs without keras_transformer, errors included.

The probes run in this test process's serving helper (tests/serving_helper.py), a separate
interpreter with TensorFlow and tensorflow-text only; each probe's outputs, or the error it
raised, come back as JSON for the tests to check one by one.
"""

from tests.serving_helper import ask


def probe(name, value, dtype="string", via="serve"):
    """One call: `value` as a `tf.constant` of `dtype`, through `serve` or the signature."""
    return {"name": name, "value": value, "dtype": dtype, "via": via}


def run_probes(directory, probes):
    """Runs `probes` on the SavedModel in `directory` in the serving helper; results by
    probe name."""
    answer = ask("probes", directory=str(directory), probes=probes)
    assert not answer["imported_keras_transformer"]
    return answer["result"]


def assert_refused(result, error, *texts):
    """A probe's `result` is the `error` (an exception class name) with each of `texts` in
    its message."""
    assert result.get("error") == error, result
    for text in texts:
        assert text in result["message"], (text, result["message"])
