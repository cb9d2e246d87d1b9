"""Saves killed with SIGKILL part-way, and what the next save or load makes of their leftovers.

One child process starts a save over a previous one for each scenario in turn and pauses
at that scenario's point (its own monkeypatches write a marker file and wait). A paused
process writes nothing, so the folder then is what a SIGKILL there would leave: the test
copies it, lets the save go on, and kills the child for real after the last scenario, so
the pid in the copies' leftover names is a dead process's. Each test then checks, on its
copy, that the previous save is whole and byte-for-byte unchanged, and that the next save
leaves no sibling behind.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from keras_transformer.saving import export_serving, load_pretrained, save_pretrained
from keras_transformer.saving.atomic import host_tag, leftover_name, recover_directory
from tests.saving.saving_helpers import INPUTS, dead_pid, file_hashes, tiny_model

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
QUERY = "A man rides a bike."
PAUSE_DEADLINE_S = 120

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModel export needs TensorFlow"
)

PRETRAINED_POINTS = ["writing", "between_renames", "after_exchange"]
SERVING_POINTS = ["writing", "between_renames"]
# In the child's order: the pretrained saves first, they need no tracing.
SCENARIOS = [("pretrained", point) for point in PRETRAINED_POINTS] + [
    ("serving", point) for point in SERVING_POINTS
]
FOLDER = {"pretrained": "models", "serving": "exports"}
LEFTOVER_KIND = {"pretrained": "saving", "serving": "exporting"}  # in the leftovers' names
SIGNAL_FILES = ("paused", "go", "failed")

# argv: the plan, JSON: the tokenizer directory, the start file, and per scenario its
# saver ("pretrained" or "serving"), pause point, target and paused / go / failed files.
CHILD_SCRIPT = textwrap.dedent(
    """
    import contextlib, json, os, pathlib, shutil, sys, time, traceback

    plan = json.loads(sys.argv[1])

    import keras
    from keras_transformer.saving import atomic, export_serving, save_pretrained
    from keras_transformer.text import SubwordTokenizer
    from tests.saving.saving_helpers import tiny_model

    def wait_for(path):
        # Bounded, so that a child whose test process died does not stay behind for good.
        deadline = time.monotonic() + 600
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                sys.exit(f"{path} never came")
            time.sleep(0.05)

    def run(saver, point, target, paused, go, failed):
        target = pathlib.Path(target)
        kind = "saving" if saver == "pretrained" else "exporting"

        def pause():
            pathlib.Path(paused).write_text(str(os.getpid()))
            wait_for(go)  # The test copies the folder, then lets the save go on.

        def is_staging(path):
            return os.path.basename(str(path)).startswith(f".{target.name}.{kind}-")

        with contextlib.ExitStack() as undo:  # This scenario's patches only.
            if point == "writing" and saver == "pretrained":
                save_weights = model.save_weights

                def paused_save_weights(*args, **kwargs):
                    save_weights(*args, **kwargs)
                    pause()

                model.save_weights = paused_save_weights
                undo.callback(setattr, model, "save_weights", save_weights)
            elif point == "writing":
                archive_class = type(keras.export.ExportArchive())
                write_out = archive_class.write_out

                def paused_write_out(self, *args, **kwargs):
                    write_out(self, *args, **kwargs)
                    pause()

                archive_class.write_out = paused_write_out
                undo.callback(setattr, archive_class, "write_out", write_out)
            elif point == "between_renames":
                # The two-rename path of systems without renameat2.
                undo.callback(setattr, atomic, "CAN_EXCHANGE", atomic.CAN_EXCHANGE)
                atomic.CAN_EXCHANGE = False
                rename = os.rename

                def paused_rename(source, destination):
                    if is_staging(source):  # The previous save is retired by now.
                        pause()
                    rename(source, destination)

                os.rename = paused_rename
                undo.callback(setattr, os, "rename", rename)
            elif point == "after_exchange":
                rmtree = shutil.rmtree

                def paused_rmtree(path, *args, **kwargs):
                    if is_staging(path):  # It holds the previous save now.
                        pause()
                    rmtree(path, *args, **kwargs)

                shutil.rmtree = paused_rmtree
                undo.callback(setattr, shutil, "rmtree", rmtree)
            if saver == "pretrained":
                save_pretrained(model, target, tokenizer)
            else:
                export_serving(model, tokenizer, target, beam_size=1)
        if not os.path.exists(paused):
            raise RuntimeError("the save finished without pausing")

    keras.utils.set_random_seed(99)  # Other weights than the previous saves'.
    model = tiny_model()
    tokenizer = SubwordTokenizer.load(plan["tokenizer"])
    wait_for(plan["start"])  # The previous saves are made while this process imports.
    for scenario in plan["scenarios"]:
        try:
            run(**scenario)
        except Exception:
            # The test goes on to the next scenario: each one fails on its own.
            message = traceback.format_exc()
            print(message, file=sys.stderr, flush=True)
            pathlib.Path(scenario["failed"] + ".part").write_text(message)
            os.replace(scenario["failed"] + ".part", scenario["failed"])
    time.sleep(600)  # Until the test kills this process.
    sys.exit("never killed")
    """
)


def selected_scenarios(request):
    """The scenarios of the tests that run: `-k` or a test id may pick a few of them."""
    saver_of = {
        "test_killed_save_pretrained": "pretrained",
        "test_killed_export_serving": "serving",
    }
    picked = {
        (saver_of[item.originalname], item.callspec.params["point"])
        for item in request.session.items
        if item.module is request.module and item.originalname in saver_of
    }
    if keras.backend.backend() != "tensorflow":
        picked = {(saver, point) for saver, point in picked if saver != "serving"}
    return [scenario for scenario in SCENARIOS if scenario in picked]


@pytest.fixture(scope="module")
def previous_pretrained(tmp_path_factory, tokenizer):
    """The save each pretrained scenario saves over: made once, copied byte for byte."""
    keras.utils.set_random_seed(1234)
    model = tiny_model()
    target = tmp_path_factory.mktemp("previous") / "run"
    save_pretrained(model, target, tokenizer, metadata={"version": 1})
    return SimpleNamespace(
        target=target, hashes=file_hashes(target), outputs=np.asarray(model(INPUTS))
    )


@pytest.fixture(scope="module")
def previous_export(tmp_path_factory, tokenizer):
    """The SavedModel each serving scenario exports over: made once, copied byte for byte."""
    import tensorflow as tf

    keras.utils.set_random_seed(1234)
    target = tmp_path_factory.mktemp("previous") / "run"
    export_serving(tiny_model(), tokenizer, target, beam_size=1)
    loaded = tf.saved_model.load(str(target))  # Kept while serving: its variables die with it.
    translation = loaded.serve(tf.constant([QUERY]))["translations"].numpy().tolist()
    return SimpleNamespace(target=target, hashes=file_hashes(target), translation=translation)


class KilledSaves:
    """The folders as the child left them paused at each scenario's point, and its end."""

    def __init__(self, stderr_path):
        self.snapshots = {}  # (saver, point) -> the copied folder
        self.failures = {}  # (saver, point) -> why there is no copy
        self.pid = None
        self.returncode = None
        self.stderr_path = stderr_path

    @property
    def stderr(self):
        text = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return f"the child's stderr: {text[-3000:]}"

    def restore(self, saver, point, tmp_path):
        """Copies the scenario's folder into `tmp_path`, as it was; returns the copy.

        Checks first that the child was killed, and left there what a kill leaves.
        """
        if (saver, point) not in self.snapshots:
            reason = self.failures.get((saver, point), "the scenario was not run")
            pytest.fail(f"no {saver} save paused at {point}: {reason}\n{self.stderr}")
        folder = tmp_path / FOLDER[saver]
        shutil.copytree(self.snapshots[saver, point], folder, symlinks=True)
        assert self.returncode == -signal.SIGKILL, self.stderr
        assert_left_by_the_kill(folder, point, LEFTOVER_KIND[saver], self.pid)
        return folder


def wait_for_pause(child, paused, failed):
    """`None` once the child is paused, else why it is not."""
    deadline = time.monotonic() + PAUSE_DEADLINE_S
    while not paused.exists():
        if failed.exists():
            return f"the save failed in the child: {failed.read_text()[-3000:]}"
        if child.poll() is not None:
            return f"the child ended (code {child.returncode}) before pausing"
        if time.monotonic() > deadline:
            return f"the child never reached the pause in {PAUSE_DEADLINE_S} s"
        time.sleep(0.05)
    return None


@pytest.fixture(scope="module")
def killed_saves(request, tmp_path_factory, tokenizer):
    """Runs every selected scenario in one child process, which is SIGKILLed at the end."""
    scenarios = selected_scenarios(request)
    root = tmp_path_factory.mktemp("killed_saves")
    control = root / "control"  # Outside the saves' folders: no extra names in them.
    control.mkdir()
    tokenizer.save(root / "tokenizer")
    plan = {"tokenizer": str(root / "tokenizer"), "start": str(control / "start")}
    plan["scenarios"] = [
        {
            "saver": saver,
            "point": point,
            "target": str(root / f"{saver}-{point}" / FOLDER[saver] / "run"),
            **{name: str(control / f"{saver}-{point}.{name}") for name in SIGNAL_FILES},
        }
        for saver, point in scenarios
    ]
    result = KilledSaves(root / "child-stderr.txt")
    with open(result.stderr_path, "w") as stderr:  # A file: a full pipe would block the child.
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_SCRIPT, json.dumps(plan)],
            cwd=REPOSITORY,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    result.pid = child.pid
    try:
        # Made while the child imports TensorFlow; each scenario saves over a copy.
        for scenario in plan["scenarios"]:
            pretrained = scenario["saver"] == "pretrained"
            fixture = "previous_pretrained" if pretrained else "previous_export"
            previous = request.getfixturevalue(fixture)
            shutil.copytree(previous.target, scenario["target"], symlinks=True)
        pathlib.Path(plan["start"]).touch()
        for index, ((saver, point), scenario) in enumerate(zip(scenarios, plan["scenarios"])):
            paused, failed = pathlib.Path(scenario["paused"]), pathlib.Path(scenario["failed"])
            reason = wait_for_pause(child, paused, failed)
            if reason is not None and failed.exists():
                result.failures[saver, point] = reason  # The child goes on to the next one.
                continue
            if reason is not None:  # Dead or stuck: no later scenario can run either.
                for later in scenarios[index:]:
                    result.failures[later] = f"at {saver} {point}, {reason}"
                break
            folder = pathlib.Path(scenario["target"]).parent
            snapshot = root / "snapshots" / f"{saver}-{point}"
            shutil.copytree(folder, snapshot, symlinks=True)
            result.snapshots[saver, point] = snapshot
            if index < len(scenarios) - 1:  # The last one ends with the kill, still paused.
                pathlib.Path(scenario["go"]).touch()
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=60)  # Reaped: its pid is no longer a live process's.
    result.returncode = child.returncode
    return result


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


@pytest.mark.parametrize("point", PRETRAINED_POINTS)
def test_killed_save_pretrained(tmp_path, tokenizer, killed_saves, previous_pretrained, point):
    parent = killed_saves.restore("pretrained", point, tmp_path)
    target = parent / "run"
    hashes, outputs = previous_pretrained.hashes, previous_pretrained.outputs

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
@pytest.mark.parametrize("point", SERVING_POINTS)
def test_killed_export_serving(tmp_path, tokenizer, killed_saves, previous_export, point):
    import tensorflow as tf

    parent = killed_saves.restore("serving", point, tmp_path)
    target = parent / "run"
    hashes, translation = previous_export.hashes, previous_export.translation

    # What the next export does first; `tf.saved_model.load` cannot do it.
    assert recover_directory(target) == (point == "between_renames")
    assert leftovers(parent) == ["run"]
    assert file_hashes(target) == hashes
    loaded = tf.saved_model.load(str(target))
    served = loaded.serve(tf.constant([QUERY]))["translations"]
    assert served.numpy().tolist() == translation
    assert len(translation[0]) > 0

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
