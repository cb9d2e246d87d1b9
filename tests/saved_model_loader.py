"""Loading an exported SavedModel the way a user without keras_transformer would."""

import json
import os
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter: TensorFlow and tensorflow-text only. Standard input holds
# the jobs, `[{"kind": "translate" | "classify", "directory": ..., "queries": [...]}]`;
# the last line printed, one result per job. TensorFlow's import is most of the cost, so
# one process serves every job of a test module.
LOAD_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    def translate(served, queries):
        signature = served.signatures["serving_default"]
        batch = signature(sentences=tf.constant(queries))["translations"].numpy()
        one_by_one = [served.serve(tf.constant([q]))["translations"].numpy()[0] for q in queries]
        empty = served.serve(tf.constant([], tf.string))["translations"].shape.as_list()
        return {
            "batch": [t.decode("utf-8") for t in batch],
            "one_by_one": [t.decode("utf-8") for t in one_by_one],
            "empty": empty,
        }

    def classify(served, queries):
        signature = served.signatures["serving_default"]
        batch = signature(sentences=tf.constant(queries))
        one_by_one = [served.serve(tf.constant([q]))["probabilities"].numpy()[0] for q in queries]
        empty = served.serve(tf.constant([], tf.string))
        return {
            "outputs": sorted(batch),
            "label": batch["label"].numpy().tolist(),
            "probabilities": batch["probabilities"].numpy().tolist(),
            "dtypes": {key: value.dtype.name for key, value in batch.items()},
            "one_by_one": [row.tolist() for row in one_by_one],
            "empty": {k: [v.shape.as_list(), v.dtype.name] for k, v in empty.items()},
        }

    results = []
    for job in json.loads(sys.stdin.read()):
        served = tf.saved_model.load(job["directory"])
        run = translate if job["kind"] == "translate" else classify
        results.append(run(served, job["queries"]))
    imported = any(m.startswith("keras_transformer") for m in sys.modules)
    for result in results:
        result["imported_keras_transformer"] = imported
    print(json.dumps(results))
    """
)


def load_all_in_fresh_process(jobs):
    """Runs `[(kind, directory, queries), ...]` in one fresh process; a result per job.

    `kind` is "translate" (a translator's SavedModel: `batch`, `one_by_one` and `empty`
    translations) or "classify" (a classifier's: `label`, `probabilities`, their `dtypes`,
    `one_by_one` probabilities and the `empty` batch's shapes); every result also says
    whether `imported_keras_transformer`.
    """
    payload = [
        {"kind": kind, "directory": str(directory), "queries": list(queries)}
        for kind, directory, queries in jobs
    ]
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def load_in_fresh_process(directory, queries):
    """A translator's SavedModel at `directory` on `queries` (see `load_all_in_fresh_process`)."""
    return load_all_in_fresh_process([("translate", directory, queries)])[0]


def classify_in_fresh_process(directory, queries):
    """Label and probabilities from a classifier's SavedModel, loaded without this library."""
    return load_all_in_fresh_process([("classify", directory, queries)])[0]
