"""Loading an exported SavedModel the way a user without keras_transformer would."""

import json
import os
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter: TensorFlow and tensorflow-text only.
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


def load_in_fresh_process(directory, queries):
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(directory), json.dumps(queries)],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
