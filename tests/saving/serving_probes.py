"""Calling an exported SavedModel on odd inputs in a fresh process, errors included.

One process runs every probe (TensorFlow's import dominates the cost); each probe's
outputs, or the error it raised, come back as JSON for the tests to check one by one.
"""

import json
import os
import subprocess
import sys
import textwrap

PROBE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    def describe(value):
        array = value.numpy()
        if value.dtype == tf.string:
            values = [text.decode("utf-8") for text in array.reshape(-1).tolist()]
        else:
            values = array.tolist()
        return {"shape": value.shape.as_list(), "dtype": value.dtype.name, "values": values}

    results = {}
    for job in json.loads(sys.stdin.read()):
        served = tf.saved_model.load(job["directory"])
        for probe in job["probes"]:
            value = tf.constant(probe["value"], dtype=probe["dtype"])
            if probe["via"] == "signature":
                call = lambda: served.signatures["serving_default"](sentences=value)
            else:
                call = lambda: served.serve(value)
            try:
                outputs = call()
                result = {key: describe(output) for key, output in outputs.items()}
            except Exception as error:
                result = {"error": type(error).__name__, "message": str(error)}
            results[probe["name"]] = result
    print(json.dumps(results))
    """
)


def probe(name, value, dtype="string", via="serve"):
    """One call: `value` as a `tf.constant` of `dtype`, through `serve` or the signature."""
    return {"name": name, "value": value, "dtype": dtype, "via": via}


def run_probes(jobs):
    """Runs `[(directory, [probe, ...]), ...]` in one fresh process; results by probe name."""
    payload = [{"directory": str(directory), "probes": probes} for directory, probes in jobs]
    result = subprocess.run(
        [sys.executable, "-c", PROBE_SCRIPT],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
