"""Saves killed with SIGKILL part-way, and what the next save or load makes of their leftovers.

A child process starts a save over a previous one and pauses at a chosen point (its own
monkeypatches write a marker file and sleep); the test kills it there, then checks that
the previous save is whole and byte-for-byte unchanged, and that the next save leaves no
sibling behind.
"""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest

from keras_transformer.saving import export_serving, load_pretrained, save_pretrained
from keras_transformer.saving.atomic import host_tag, leftover_name, recover_directory
from tests.saving.saving_helpers import (
    dead_pid,
    file_hashes,
    tiny_model,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer()


REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
INPUTS = {
    "encoder_token_ids": np.array([[5, 6, 7, 0], [8, 9, 10, 11]], "int32"),
    "decoder_token_ids": np.array([[2, 12, 13], [2, 14, 0]], "int32"),
}
QUERY = "A man rides a bike."

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModel export needs TensorFlow"
)

# argv: saver ("pretrained" or "serving"), pause point, target, marker, tokenizer dir.
CHILD_SCRIPT = textwrap.dedent(
    """
    import os, pathlib, shutil, sys, time

    saver, point, target, marker, tokenizer_dir = sys.argv[1:6]
    target = pathlib.Path(target)

    import keras
    from keras_transformer.models import Seq2SeqTransformer
    from keras_transformer.saving import atomic, export_serving, save_pretrained
    from keras_transformer.text import SubwordTokenizer

    def pause():
        pathlib.Path(marker).write_text(str(os.getpid()))
        time.sleep(600)  # Until the test kills this process.

    def is_staging(path):
        return os.path.basename(str(path)).startswith(f".{target.name}.{kind}-")

    kind = "saving" if saver == "pretrained" else "exporting"
    keras.utils.set_random_seed(99)  # Other weights than the previous save's.
    model = Seq2SeqTransformer(
        80, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
        intermediate_dim=32,
    )
    tokenizer = SubwordTokenizer.load(tokenizer_dir)
    if point == "writing" and saver == "pretrained":
        save_weights = model.save_weights

        def paused_save_weights(*args, **kwargs):
            save_weights(*args, **kwargs)
            pause()

        model.save_weights = paused_save_weights
    elif point == "writing":
        archive_class = type(keras.export.ExportArchive())
        write_out = archive_class.write_out

        def paused_write_out(self, *args, **kwargs):
            write_out(self, *args, **kwargs)
            pause()

        archive_class.write_out = paused_write_out
    elif point == "between_renames":
        atomic.CAN_EXCHANGE = False  # The two-rename path of systems without renameat2.
        rename = os.rename

        def paused_rename(source, destination):
            if is_staging(source):  # The previous save is retired by now.
                pause()
            rename(source, destination)

        os.rename = paused_rename
    elif point == "after_exchange":
        rmtree = shutil.rmtree

        def paused_rmtree(path, *args, **kwargs):
            if is_staging(path):  # It holds the previous save now.
                pause()
            rmtree(path, *args, **kwargs)

        shutil.rmtree = paused_rmtree
    if saver == "pretrained":
        save_pretrained(model, target, tokenizer)
    else:
        export_serving(model, tokenizer, target, beam_size=1)
    sys.exit("the save finished without pausing")
    """
)


def kill_while_saving(saver, point, target, tokenizer_dir):
    """Starts the child's save over `target`, kills it at `point`; returns the child's pid."""
    marker = target.parent.parent / "paused"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_SCRIPT, saver, point, str(target), str(marker)]
        + [str(tokenizer_dir)],
        cwd=REPOSITORY,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if child.poll() is not None:
                pytest.fail(f"the child ended before pausing: {child.stderr.read()[-3000:]}")
            assert time.monotonic() < deadline, "the child never reached the pause"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()  # Reaped: its pid is no longer a live process's.
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return child.pid


def leftovers(parent):
    return sorted(path.name for path in parent.iterdir())


# What the kill leaves in the folder, before any clean-up: `{pid}` is the child's.
LEFT_BY_THE_KILL = {
    "writing": ["{kind}-{pid}-", "run"],
    "between_renames": ["old-{pid}-", "{kind}-{pid}-"],
    "after_exchange": ["{kind}-{pid}-", "run"],
}


def assert_left_by_the_kill(parent, point, kind, pid):
    names = leftovers(parent)
    expected = [entry.format(kind=kind, pid=pid) for entry in LEFT_BY_THE_KILL[point]]
    assert len(names) == len(expected), names
    for entry in expected:
        matches = [n for n in names if n == entry or n.startswith(f".run.{entry}")]
        assert len(matches) == 1, (entry, names)


@pytest.mark.parametrize("point", ["writing", "between_renames", "after_exchange"])
def test_killed_save_pretrained(tmp_path, tokenizer, point):
    parent = tmp_path / "models"
    target = parent / "run"
    previous = tiny_model()
    save_pretrained(previous, target, tokenizer, metadata={"version": 1})
    hashes = file_hashes(target)
    outputs = np.asarray(previous(INPUTS))
    pid = kill_while_saving("pretrained", point, target, target / "tokenizer")
    assert_left_by_the_kill(parent, point, "saving", pid)

    bundle = load_pretrained(target)  # Puts back a retired save; reads only otherwise.
    if point == "after_exchange":
        # The swap is the save's last step: the new save is whole and in place.
        assert file_hashes(target) != hashes
        assert np.abs(np.asarray(bundle.model(INPUTS)) - outputs).max() > 1e-3
        assert "version" not in bundle.metadata
    else:
        assert file_hashes(target) == hashes
        np.testing.assert_array_equal(np.asarray(bundle.model(INPUTS)), outputs)
        assert bundle.metadata["version"] == 1

    save_pretrained(tiny_model(), target, tokenizer, metadata={"version": 2})
    assert leftovers(parent) == ["run"]
    assert load_pretrained(target).metadata["version"] == 2


@tensorflow_only
@pytest.mark.parametrize("point", ["writing", "between_renames"])
def test_killed_export_serving(tmp_path, tokenizer, point):
    import tensorflow as tf

    parent = tmp_path / "exports"
    target = parent / "run"
    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer.save(tokenizer_dir)
    export_serving(tiny_model(), tokenizer, target, beam_size=1)
    hashes = file_hashes(target)
    loaded = tf.saved_model.load(str(target))  # Kept: its variables die with it.
    translation = loaded.serve(tf.constant([QUERY]))["translations"]
    pid = kill_while_saving("serving", point, target, tokenizer_dir)
    assert_left_by_the_kill(parent, point, "exporting", pid)

    # What the next export does first; `tf.saved_model.load` cannot do it.
    assert recover_directory(target) == (point == "between_renames")
    assert leftovers(parent) == ["run"]
    assert file_hashes(target) == hashes
    loaded = tf.saved_model.load(str(target))
    served = loaded.serve(tf.constant([QUERY]))["translations"]
    assert served.numpy().tolist() == translation.numpy().tolist()
    assert len(translation.numpy()[0]) > 0

    export_serving(tiny_model(), tokenizer, target, beam_size=1)
    assert leftovers(parent) == ["run"]
    assert file_hashes(target) != hashes


def test_dead_processes_leftovers_are_removed_live_ones_kept(tmp_path):
    target = save_pretrained(tiny_model(), tmp_path / "run")
    dead, alive = dead_pid(), os.getppid()
    elsewhere = host_tag("another-machine")
    removed = [
        leftover_name("run", "saving", dead, "0a1b"),
        leftover_name("run", "old", dead, "0a1c"),  # The target exists: a stale copy.
        leftover_name("run", "exporting", dead, "0a1d"),
    ]
    kept = [
        leftover_name("run", "saving", alive, "0a1e"),  # A concurrent save, still running.
        leftover_name("run", "old", alive, "0a1f"),
        leftover_name("run", "saving", dead, "0a20", host=elsewhere),  # Its pid is not ours.
        ".run.saving-x8k2j1",  # Named before pids were: whose, unknown.
        leftover_name("other", "saving", dead, "0a21"),  # Another directory's.
    ]
    for name in removed + kept:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    save_pretrained(tiny_model(), target)
    assert leftovers(tmp_path) == sorted(kept + ["run"])


def test_load_puts_back_a_save_retired_by_a_dead_process(tmp_path):
    model = tiny_model()
    target = save_pretrained(model, tmp_path / "run", metadata={"version": 1})
    hashes = file_hashes(target)
    dead = dead_pid()
    target.rename(tmp_path / leftover_name("run", "old", dead, "00ff"))
    (tmp_path / leftover_name("run", "saving", dead, "0100")).mkdir()  # The new copy.
    bundle = load_pretrained(target)
    assert bundle.metadata["version"] == 1
    np.testing.assert_array_equal(np.asarray(bundle.model(INPUTS)), np.asarray(model(INPUTS)))
    assert file_hashes(target) == hashes
    assert leftovers(tmp_path) == ["run"]


def test_load_leaves_a_live_savers_retired_directory(tmp_path):
    target = save_pretrained(tiny_model(), tmp_path / "run")
    retired = tmp_path / leftover_name("run", "old", os.getppid(), "00ff")
    target.rename(retired)
    # The live saver is between its renames: the new copy is about to arrive.
    with pytest.raises(ValueError, match="No pretrained directory at .*nothing exists"):
        load_pretrained(target)
    assert leftovers(tmp_path) == [retired.name]
