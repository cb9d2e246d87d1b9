import json

import numpy as np
import pytest

from keras_transformer.models import Seq2SeqTransformer
from keras_transformer.saving import PretrainedDirectoryError, load_pretrained, save_pretrained
from keras_transformer.text import SubwordTokenizer
from keras_transformer.version import __version__

SENTENCES = [
    "A man rides a bike.",
    "Ein Mann fährt Fahrrad.",
    "Two dogs play in the snow.",
    "Zwei Hunde spielen im Schnee.",
] * 20
INPUTS = {
    "encoder_token_ids": np.array([[5, 6, 7, 0], [8, 9, 10, 11]], "int32"),
    "decoder_token_ids": np.array([[2, 12, 13], [2, 14, 0]], "int32"),
}


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer.train(SENTENCES, vocabulary_size=80, byte_fallback=False)


def tiny_model():
    return Seq2SeqTransformer(
        80,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
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


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda d: (d / "model.weights.h5").unlink(), "'model.weights.h5' is missing"),
        (lambda d: (d / "metadata.json").unlink(), "'metadata.json' is missing"),
        (lambda d: (d / "config.json").write_text("{not json"), "config.json' is not valid JSON"),
        (
            lambda d: (d / "config.json").write_text(json.dumps({"class_name": "Nope"})),
            "config.json' does not describe a model",
        ),
        (
            lambda d: (d / "model.weights.h5").write_bytes(b"garbage"),
            "model.weights.h5' could not be loaded",
        ),
        (
            lambda d: (d / "tokenizer" / "subword.model").unlink(),
            "tokenizer' could not be loaded",
        ),
    ],
)
def test_damaged_directory_names_the_file(tmp_path, tokenizer, damage, match):
    directory = save_pretrained(tiny_model(), tmp_path / "run", tokenizer)
    damage(directory)
    with pytest.raises(PretrainedDirectoryError, match=match):
        load_pretrained(directory)


def test_weights_of_another_model_are_rejected(tmp_path):
    directory = save_pretrained(tiny_model(), tmp_path / "run")
    other = Seq2SeqTransformer(
        80,
        num_encoder_layers=2,
        num_decoder_layers=1,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
    )
    other.save_weights(directory / "model.weights.h5")
    with pytest.raises(PretrainedDirectoryError, match="belongs to another model"):
        load_pretrained(directory)


def test_missing_directory(tmp_path):
    with pytest.raises(PretrainedDirectoryError, match="No pretrained directory"):
        load_pretrained(tmp_path / "nothing")
