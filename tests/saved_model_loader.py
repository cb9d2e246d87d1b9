"""Loading an exported SavedModel the way a user without keras_transformer would."""

import json
import os
import subprocess
import sys
import textwrap

# Each runs in a fresh interpreter: TensorFlow and tensorflow-text only.
LOAD_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    served = tf.saved_model.load(sys.argv[1])
    queries = json.loads(sys.argv[2])
    signature = served.signatures["serving_default"]
    batch = signature(sentences=tf.constant(queries))["translations"].numpy()
    one_by_one = [served.serve(tf.constant([q]))["translations"].numpy()[0] for q in queries]
    empty = served.serve(tf.constant([], tf.string))["translations"].shape.as_list()
    print(json.dumps({
        "batch": [t.decode("utf-8") for t in batch],
        "one_by_one": [t.decode("utf-8") for t in one_by_one],
        "empty": empty,
        "imported_keras_transformer": any(m.startswith("keras_transformer") for m in sys.modules),
    }))
    """
)


CLASSIFY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    served = tf.saved_model.load(sys.argv[1])
    queries = json.loads(sys.argv[2])
    signature = served.signatures["serving_default"]
    batch = signature(sentences=tf.constant(queries))
    one_by_one = [served.serve(tf.constant([q]))["probabilities"].numpy()[0] for q in queries]
    empty = served.serve(tf.constant([], tf.string))
    print(json.dumps({
        "outputs": sorted(batch),
        "label": batch["label"].numpy().tolist(),
        "probabilities": batch["probabilities"].numpy().tolist(),
        "dtypes": {key: value.dtype.name for key, value in batch.items()},
        "one_by_one": [row.tolist() for row in one_by_one],
        "empty": {key: [value.shape.as_list(), value.dtype.name] for key, value in empty.items()},
        "imported_keras_transformer": any(m.startswith("keras_transformer") for m in sys.modules),
    }))
    """
)


def load_in_fresh_process(directory, queries, script=LOAD_SCRIPT):
    """Runs `script` (a translator's by default) on the SavedModel at `directory`."""
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory), json.dumps(queries)],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def classify_in_fresh_process(directory, queries):
    """Label and probabilities from a classifier's SavedModel, loaded without this library."""
    return load_in_fresh_process(directory, queries, CLASSIFY_SCRIPT)
