"""A long-lived process that calls exported models the way a user without keras_transformer would.

`ask(kind, **fields)` sends one request to this test process's helper and returns its
answer. The helper is a separate interpreter that imports TensorFlow and tensorflow-text
(and onnxruntime, once an ONNX check comes); never keras_transformer, and keras only as
TensorFlow's own import does (for `tf.keras`), as in a user's process. Importing TensorFlow
is most of what a fresh process costs, so one helper, started on first use, serves every
request of the test process and is shut down when that process exits.

The protocol: one JSON request per line on the helper's stdin, `{"id", "kind", ...}`;
one JSON answer per line on its stdout, `{"id", "result" | "traceback",
"imported_keras_transformer"}`. A job that raises answers with its traceback and the
helper carries on; a helper that dies, or does not answer in time, is killed and the
next request starts a fresh one. Either way the calling test fails with the reason.

Request kinds (the `result` each answers with):

- "translate" (`directory`, `queries`): a translator's SavedModel's `batch`, `one_by_one`
  and `empty` translations.
- "classify" (`directory`, `queries`): a classifier's `outputs`, `label`, `probabilities`,
  their `dtypes`, `one_by_one` probabilities and the `empty` batch's shapes and dtypes.
- "probes" (`directory`, `probes`): each probe's outputs, or the error it raised, by name
  (see tests/saving/serving_probes.py).
- "check_exports" (`jobs`: `{name: [saved_model, onnx_file, inputs_npz, expected_npy]}`):
  `{name: [SavedModel's max abs error, ONNX Runtime's]}` against the expected logits.
"""

import atexit
import itertools
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading

# Long enough for the first request, which also pays for importing TensorFlow.
TIMEOUT_S = 300
STDERR_TAIL = 3000

_helper = None
_ids = itertools.count()


def ask(kind, timeout=TIMEOUT_S, **fields):
    """The helper's answer to one request: `{"result", "imported_keras_transformer"}`.

    Raises AssertionError with the job's traceback if it raised, or with the helper's
    stderr tail if the helper died or gave no answer within `timeout` seconds.
    """
    global _helper
    if _helper is None or _helper.owner != os.getpid():
        _helper = _Helper()
    helper = _helper
    request_id = next(_ids)
    try:
        answer = helper.ask({"id": request_id, "kind": kind, **fields}, timeout)
    except _HelperFailed as failure:
        _helper = None
        stderr = helper.stop(kill=True)
        raise AssertionError(f"{failure}\n--- the helper's stderr ---\n{stderr}") from None
    if "traceback" in answer:
        raise AssertionError(f"the helper's {kind!r} job raised:\n{answer['traceback']}")
    return answer


class _HelperFailed(Exception):
    pass


class _Helper:
    def __init__(self):
        self.owner = os.getpid()
        # A file rather than a pipe: nothing has to drain it while the helper works.
        self._stderr = tempfile.TemporaryFile()
        # `runpy.run_path` of a file leaves `sys.path` as `python -c` has it: the helper
        # sees the packages a user would, not the tests' directory.
        bootstrap = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
        self._process = subprocess.Popen(
            [sys.executable, "-c", bootstrap, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        # A thread reads the answers so that waiting for one can time out.
        self._answers = queue.Queue()
        threading.Thread(target=self._read_answers, daemon=True).start()
        atexit.register(self.stop)

    def _read_answers(self):
        # This thread alone closes stdout: closing it under a blocked read would raise here.
        with self._process.stdout:
            for line in self._process.stdout:
                self._answers.put(line)
        self._answers.put(None)

    def ask(self, request, timeout):
        try:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
        except OSError as error:
            raise _HelperFailed(
                f"could not send {request['kind']!r} to the helper"
                f" (exit code {self._process.poll()}): {error}"
            ) from None
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise _HelperFailed(
                f"the helper gave no answer to {request['kind']!r} in {timeout} s"
            ) from None
        if line is None:
            try:
                code = self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = "none: it closed its answers but still runs"
            raise _HelperFailed(f"the helper exited (code {code}) during {request['kind']!r}")
        try:
            answer = json.loads(line)
        except ValueError:
            raise _HelperFailed(
                f"the helper answered {request['kind']!r} with {line[:500]!r}"
            ) from None
        if answer.get("id") != request["id"]:
            raise _HelperFailed(f"answer {answer.get('id')} to request {request['id']}")
        return answer

    def stop(self, kill=False):
        """Ends the helper (at once if `kill`); the last of what it wrote to stderr."""
        atexit.unregister(self.stop)
        if self.owner != os.getpid():  # a forked child's copy: the helper is its parent's
            return ""
        if not kill:
            # End of input: the helper finishes the request it is on, if any, and exits.
            try:
                self._process.stdin.close()
                self._process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                kill = True
        if kill:
            self._process.kill()
            self._process.wait()
        try:
            self._process.stdin.close()
        except OSError:  # what was left to flush has nowhere to go
            pass
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - STDERR_TAIL))
        tail = self._stderr.read().decode("utf-8", "replace")
        self._stderr.close()
        return tail


def _serve():
    """The helper's side: answers requests until its stdin closes."""
    import gc
    import traceback

    # Answers go to a private copy of stdout; whatever else writes to stdout, Python or
    # TensorFlow's C++ side, lands on stderr and cannot corrupt an answer.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    def translate(request):
        served = tf.saved_model.load(request["directory"])
        queries = request["queries"]
        signature = served.signatures["serving_default"]
        batch = signature(sentences=tf.constant(queries))["translations"].numpy()
        one_by_one = [served.serve(tf.constant([q]))["translations"].numpy()[0] for q in queries]
        empty = served.serve(tf.constant([], tf.string))["translations"].shape.as_list()
        return {
            "batch": [t.decode("utf-8") for t in batch],
            "one_by_one": [t.decode("utf-8") for t in one_by_one],
            "empty": empty,
        }

    def classify(request):
        served = tf.saved_model.load(request["directory"])
        queries = request["queries"]
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

    def describe(value):
        array = value.numpy()
        if value.dtype == tf.string:
            values = [text.decode("utf-8") for text in array.reshape(-1).tolist()]
        else:
            values = array.tolist()
        return {"shape": value.shape.as_list(), "dtype": value.dtype.name, "values": values}

    def probes(request):
        served = tf.saved_model.load(request["directory"])
        results = {}
        for probe in request["probes"]:
            value = tf.constant(probe["value"], dtype=probe["dtype"])
            # The probes are odd inputs: an error is an outcome the tests check.
            try:
                if probe["via"] == "signature":
                    outputs = served.signatures["serving_default"](sentences=value)
                else:
                    outputs = served.serve(value)
                result = {key: describe(output) for key, output in outputs.items()}
            except Exception as error:
                result = {"error": type(error).__name__, "message": str(error)}
            results[probe["name"]] = result
        return results

    def check_exports(request):
        import onnxruntime  # only here: the other requests do without it

        results = {}
        for name, (directory, onnx_file, inputs_file, expected_file) in request["jobs"].items():
            inputs = dict(np.load(inputs_file))
            expected = np.load(expected_file)
            # Held in a name: a SavedModel's variables go with the object `load` returns.
            served = tf.saved_model.load(directory)
            saved = served.serve(inputs).numpy()
            session = onnxruntime.InferenceSession(onnx_file)
            feed = {i.name: inputs[i.name] for i in session.get_inputs()}
            onnx = session.run(None, feed)[0]
            results[name] = [
                float(np.max(np.abs(saved - expected))),
                float(np.max(np.abs(onnx - expected))),
            ]
        return results

    jobs = {
        "translate": translate,
        "classify": classify,
        "probes": probes,
        "check_exports": check_exports,
    }
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"result": jobs[request["kind"]](request)}
        except Exception:
            answer = {"traceback": traceback.format_exc()}
        # A loaded SavedModel's objects refer to each other; collecting them now keeps the
        # helper's memory from growing with every model it has served.
        gc.collect()
        answer["id"] = request["id"]
        answer["imported_keras_transformer"] = any(
            name.startswith("keras_transformer") for name in sys.modules
        )
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
