import warnings

import pytest

from tests.examples.example_runs import CLASSIFICATION_SMALL
from tests.no_keras_reset import _fresh_keras_state  # noqa: F401 (overrides the suite-wide one)

# The example runs that several test modules (and the README's snippets) read, once a session.


@pytest.fixture(scope="session")
def translation_quick_run(tmp_path_factory):
    """A tiny translation run: `(output_dir, scores, warnings a user would see)`."""
    from examples.translation import train

    output = tmp_path_factory.mktemp("translation")
    argv = [
        "--quick",
        "--train-pairs", "300",
        "--eval-pairs", "6",
        "--epochs", "2",
        "--vocabulary-size", "400",
        "--tokens-per-batch", "1024",
        "--beam-size", "2",
        "--average-checkpoints", "2",
        # One layer each side, 64 wide: the tests read what the run writes, not its BLEU.
        "--num-layers", "1",
        "--hidden-dim", "64",
        "--intermediate-dim", "128",
        "--num-heads", "2",
        "--output-dir", str(output),
        # A model this undertrained has near-ties between tokens; bfloat16 rounding in the
        # XLA (saved samples) and graph (SavedModel) programs can break them differently.
        # test_serving.py covers bfloat16 models on its own.
        "--precision", "float32",
    ]  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = train.main(argv)
    # Deprecation warnings are hidden from users by default (they come from TensorFlow).
    shown = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))
    ]
    return output, scores, shown


@pytest.fixture(scope="session")
def classification_quick_run(tmp_path_factory):
    """SST-2 from scratch on 12,000 training phrases, 3 epochs: `(output_dir, scores)`."""
    from examples.text_classification import train

    output = tmp_path_factory.mktemp("sst2")
    argv = ["--quick", "--train-limit", "12000", "--epochs", "3", "--output-dir", str(output)]
    scores = train.main(argv + CLASSIFICATION_SMALL)
    return output, scores
