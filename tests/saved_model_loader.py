"""Loading an exported SavedModel the way a user without keras_transformer would.

The SavedModels load in this test process's serving helper (tests/serving_helper.py): a
separate interpreter with TensorFlow and tensorflow-text only, started once and reused,
since TensorFlow's import is most of what a fresh process costs.
"""

from tests.serving_helper import ask


def load_all_in_fresh_process(jobs):
    """Runs `[(kind, directory, queries), ...]` in the serving helper; a result per job.

    `kind` is "translate" (a translator's SavedModel: `batch`, `one_by_one` and `empty`
    translations) or "classify" (a classifier's: `label`, `probabilities`, their `dtypes`,
    `one_by_one` probabilities and the `empty` batch's shapes); every result also says
    whether `imported_keras_transformer`, which the helper never does by itself.
    """
    results = []
    for kind, directory, queries in jobs:
        if kind not in ("translate", "classify"):
            raise ValueError(f"unknown job kind {kind!r}")
        answer = ask(kind, directory=str(directory), queries=list(queries))
        results.append(
            {**answer["result"], "imported_keras_transformer": answer["imported_keras_transformer"]}
        )
    return results


def load_in_fresh_process(directory, queries):
    """A translator's SavedModel at `directory` on `queries` (see `load_all_in_fresh_process`)."""
    return load_all_in_fresh_process([("translate", directory, queries)])[0]


def classify_in_fresh_process(directory, queries):
    """Label and probabilities from a classifier's SavedModel, loaded without this library."""
    return load_all_in_fresh_process([("classify", directory, queries)])[0]
