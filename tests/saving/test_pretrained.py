import json
import re
import shutil

import numpy as np
import pytest

from keras_transformer.saving import PretrainedDirectoryError, load_pretrained, save_pretrained
from keras_transformer.version import __version__
from tests import tiny_models
from tests.saving.saving_helpers import (
    INPUTS,
    UMASK_CASES,
    assert_modes,
    modes,
    tiny_model,
    train_tokenizer,
    umask,
)


def test_round_trip(tmp_path, tokenizer):
    model = tiny_model()
    directory = save_pretrained(
        model, tmp_path / "run", tokenizer, metadata={"bleu": 12.5, "command": "train --quick"}
    )
    assert sorted(p.name for p in directory.iterdir()) == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
        "tokenizer",
    ]
    bundle = load_pretrained(directory)
    np.testing.assert_array_equal(bundle.model(INPUTS), model(INPUTS))
    assert bundle.model.get_config() == model.get_config()
    text = "Two men ride bikes in the snow."
    np.testing.assert_array_equal(bundle.tokenizer.tokenize(text), tokenizer.tokenize(text))
    assert bundle.metadata["bleu"] == 12.5
    assert bundle.metadata["library_version"] == __version__
    assert bundle.metadata["model_class"] == "Seq2SeqTransformer"


def test_failed_save_keeps_the_previous_one(tmp_path, tokenizer, monkeypatch):
    first = tiny_model()
    save_pretrained(first, tmp_path / "run", tokenizer, metadata={"version": 1})
    second = tiny_model()

    def broken_save_weights(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(second, "save_weights", broken_save_weights)
    with pytest.raises(OSError, match="disk full"):
        save_pretrained(second, tmp_path / "run", tokenizer, metadata={"version": 2})
    bundle = load_pretrained(tmp_path / "run")
    assert bundle.metadata["version"] == 1
    np.testing.assert_array_equal(bundle.model(INPUTS), first(INPUTS))
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no staging leftovers


def test_overwrite_replaces_and_refuses_when_asked(tmp_path):
    save_pretrained(tiny_model(), tmp_path / "run", metadata={"version": 1})
    save_pretrained(tiny_model(), tmp_path / "run", metadata={"version": 2})
    assert load_pretrained(tmp_path / "run").metadata["version"] == 2
    assert load_pretrained(tmp_path / "run").tokenizer is None
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_pretrained(tiny_model(), tmp_path / "run", overwrite=False)


def edit_json(path, change):
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def truncate_to_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def other_tokenizer(directory):
    """Replaces the tokenizer by one of another model, with 60 ids instead of 80."""
    shutil.rmtree(directory / "tokenizer")
    train_tokenizer(vocabulary_size=60).save(directory / "tokenizer")


WEIGHTS_UNREADABLE = (
    r"model.weights.h5' is not a readable weights file \(OSError: .*{}.*truncated or corrupted"
)
BAD_CONFIG = r"config.json' does not describe a model this library can build"


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda d: (d / "model.weights.h5").unlink(), "'model.weights.h5' is missing"),
        (lambda d: (d / "metadata.json").unlink(), "'metadata.json' is missing"),
        (lambda d: (d / "config.json").write_text("{not json"), "config.json' is not valid JSON"),
        (
            lambda d: (d / "config.json").write_text(json.dumps({"class_name": "Nope"})),
            BAD_CONFIG,
        ),
        (
            lambda d: (d / "model.weights.h5").write_bytes(b"garbage"),
            WEIGHTS_UNREADABLE.format("file signature not found"),
        ),
        (
            lambda d: truncate_to_half(d / "model.weights.h5"),
            WEIGHTS_UNREADABLE.format("truncated file"),
        ),
        (
            lambda d: (d / "model.weights.h5").write_bytes(
                np.random.default_rng(0).bytes((d / "model.weights.h5").stat().st_size)
            ),
            WEIGHTS_UNREADABLE.format("file signature not found"),
        ),
        (
            lambda d: edit_json(d / "config.json", lambda c: c["config"].update(num_heads="eight")),
            BAD_CONFIG + r".*`num_heads` must be a positive integer. Received: num_heads='eight'",
        ),
        (
            lambda d: edit_json(d / "config.json", lambda c: c["config"].update(hidden_dim=-16)),
            BAD_CONFIG + r".*`hidden_dim` must be a positive integer. Received: hidden_dim=-16",
        ),
        (
            lambda d: edit_json(d / "config.json", lambda c: c["config"].update(colour="blue")),
            BAD_CONFIG + r".*Unrecognized keyword arguments.*'colour': 'blue'",
        ),
        (
            lambda d: (d / "config.json").write_text("[1, 2]"),
            r"config.json' holds a JSON list, not an object",
        ),
        (
            lambda d: (d / "metadata.json").write_text('"just a string"'),
            r"metadata.json' holds a JSON str, not an object",
        ),
        (
            lambda d: (d / "tokenizer" / "subword.model").unlink(),
            "tokenizer' could not be loaded",
        ),
        (
            other_tokenizer,
            r"The tokenizer in '.*run/tokenizer' has 60 ids but the model of 'config.json' "
            r"embeds source_vocabulary_size=80, target_vocabulary_size=80: the tokenizer "
            "belongs to another model",
        ),
    ],
    ids=[
        "no_weights",
        "no_metadata",
        "config_not_json",
        "config_unknown_class",
        "weights_garbage",
        "weights_truncated",
        "weights_random_bytes",
        "config_num_heads_eight",
        "config_negative_size",
        "config_unknown_field",
        "config_not_object",
        "metadata_not_object",
        "no_tokenizer_file",
        "tokenizer_of_other_model",
    ],
)
def test_damaged_directory_names_the_file(tmp_path, tokenizer, damage, match):
    directory = save_pretrained(tiny_model(), tmp_path / "run", tokenizer)
    damage(directory)
    with pytest.raises(PretrainedDirectoryError, match=match) as error:
        load_pretrained(directory)
    assert isinstance(error.value, ValueError)
    assert "\n" not in str(error.value)  # Shown as one line by the command-line tools.
    assert len(str(error.value)) < 600


def test_weights_of_another_model_are_rejected(tmp_path):
    directory = save_pretrained(tiny_model(), tmp_path / "run")
    other = tiny_model(num_encoder_layers=2)
    other.save_weights(directory / "model.weights.h5")
    with pytest.raises(PretrainedDirectoryError, match="belongs to another model"):
        load_pretrained(directory)


def saved_model_folder(path):
    path.mkdir()
    (path / "saved_model.pb").write_bytes(b"")
    (path / "variables").mkdir()


def training_run_folder(path):
    save_pretrained(tiny_model(), path / "model")
    (path / "log.csv").write_text("epoch,loss\n")


def keras_file(path):
    tiny_model().save(path)


@pytest.mark.parametrize(
    "name, make, match",
    [
        (
            "run",
            training_run_folder,
            r"'{path}' is a training run folder; the saved model is in '{path}/model': pass that",
        ),
        (
            "serving",
            saved_model_folder,
            r"'{path}' is a TensorFlow SavedModel written by `export_serving`: load it with "
            r"`tf.saved_model.load` \(after `import tensorflow_text`\), or pass the directory "
            "written by `save_pretrained`",
        ),
        (
            "model.keras",
            keras_file,
            r"'{path}' is a file, a Keras `.keras` archive: load it with "
            r"`keras.saving.load_model`, not `load_pretrained`. `load_pretrained` wants a "
            r"directory written by `save_pretrained` \(config.json, model.weights.h5",
        ),
        (
            "notes.txt",
            lambda path: path.write_text("notes"),
            r"'{path}' is a file, not a directory. `load_pretrained` wants a directory",
        ),
        (
            "config.json",
            lambda path: save_pretrained(tiny_model(), path.parent),
            r"'{path}' is a file, one file of a saved model: pass the directory holding it, "
            r"'{parent}'",
        ),
        ("nothing", lambda path: None, r"No pretrained directory at '{path}': nothing exists"),
        ("empty", lambda path: path.mkdir(), r"'{path}' is an empty directory. `load_pretrained`"),
        (
            "photos",
            lambda path: (path.mkdir(), (path / "cat.jpg").write_bytes(b"")),
            r"'{path}' is not a pretrained directory: it holds none of its files",
        ),
    ],
    ids=[
        "run_folder",
        "saved_model",
        "keras_file",
        "other_file",
        "config_file",
        "missing",
        "empty",
        "unrelated_folder",
    ],
)
def test_says_what_it_was_given(tmp_path, name, make, match):
    path = tmp_path / "inside" / name
    path.parent.mkdir()
    make(path)
    pattern = match.format(path=re.escape(str(path)), parent=re.escape(str(path.parent)))
    with pytest.raises(PretrainedDirectoryError, match=pattern) as error:
        load_pretrained(path)
    assert "\n" not in str(error.value)


@UMASK_CASES
def test_modes_follow_the_umask(tmp_path, tokenizer, mask, directory_mode, file_mode):
    with umask(mask):
        directory = save_pretrained(tiny_model(), tmp_path / "shared" / "run", tokenizer)
    assert sorted(modes(directory)) == [
        ".",
        "config.json",
        "metadata.json",
        "model.weights.h5",
        "tokenizer",
        "tokenizer/subword.model",
        "tokenizer/subword.vocab",
    ]
    assert_modes(directory, directory_mode, file_mode)
    assert modes(tmp_path / "shared")["."] == directory_mode  # Made for the save.
    # Replacing a save also gives the new one the modes of the umask.
    with umask(0o022 if mask == 0o077 else 0o077):
        save_pretrained(tiny_model(), directory, tokenizer)
    assert_modes(directory, directory_mode ^ 0o055, file_mode ^ 0o044)


def test_round_trip_language_models(tmp_path):
    lm, masked = tiny_models.lm(80), tiny_models.masked_lm(80)
    ids = np.array([[2, 5, 6, 7], [2, 8, 9, 0]], "int32")
    for name, model in [("lm", lm), ("masked", masked)]:
        expected = np.asarray(model(ids, training=False))
        assert expected.shape == (2, 4, 80) and np.ptp(expected) > 1e-3
        bundle = load_pretrained(save_pretrained(model, tmp_path / name))
        assert type(bundle.model) is type(model)
        assert bundle.model.get_config() == model.get_config()
        np.testing.assert_array_equal(np.asarray(bundle.model(ids, training=False)), expected)
        assert bundle.metadata["model_class"] == type(model).__name__
