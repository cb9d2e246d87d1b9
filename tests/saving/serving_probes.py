"""Calling an exported SavedModel on odd inputs without keras_transformer, errors included.

The probes run in this test process's serving helper (tests/serving_helper.py), a separate
interpreter with TensorFlow and tensorflow-text only; each probe's outputs, or the error it
raised, come back as JSON for the tests to check one by one.
"""

from tests.serving_helper import ask


def probe(name, value, dtype="string", via="serve"):
    """One call: `value` as a `tf.constant` of `dtype`, through `serve` or the signature."""
    return {"name": name, "value": value, "dtype": dtype, "via": via}


def run_probes(jobs):
    """Runs `[(directory, [probe, ...]), ...]` in the serving helper; results by probe name."""
    results = {}
    for directory, probes in jobs:
        answer = ask("probes", directory=str(directory), probes=probes)
        assert not answer["imported_keras_transformer"]
        results.update(answer["result"])
    return results
