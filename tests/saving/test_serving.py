"""`export_serving`: a string → string SavedModel that loads without keras_transformer."""

import os

import keras
import pytest

from examples.translation.translator import translate
from keras_transformer.models import Seq2SeqTransformer, TransformerLM
from keras_transformer.saving import export_serving
from keras_transformer.text import SubwordTokenizer
from tests.saved_model_loader import load_in_fresh_process

SENTENCES = [
    "A man rides a bike.",
    "Ein Mann fährt Fahrrad.",
    "Two dogs play in the snow.",
    "Zwei Hunde spielen im Schnee.",
] * 20
QUERIES = [
    "A man rides a bike.",
    "Two dogs.",
    "",
    "A man rides a bike in the snow with two dogs.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer.train(SENTENCES, vocabulary_size=80, byte_fallback=False)


def tiny_model(dtype=None):
    return Seq2SeqTransformer(
        80,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        dtype=dtype,
    )


tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModel export needs TensorFlow"
)


@pytest.mark.backend_agnostic
@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="checks other backends")
def test_other_backends_are_refused(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="needs the TensorFlow backend.*KERAS_BACKEND=tensorflow"):
        export_serving(tiny_model(), tokenizer, tmp_path / "serving")
    assert not (tmp_path / "serving").exists()


@tensorflow_only
@pytest.mark.parametrize("beam_size", [1, 3])
def test_served_translations_equal_translate(tmp_path, tokenizer, beam_size):
    model = tiny_model()
    directory = export_serving(model, tokenizer, tmp_path / "serving", beam_size=beam_size)
    assert (directory / "saved_model.pb").is_file()
    served = load_in_fresh_process(directory, QUERIES)
    expected = translate(model, tokenizer, QUERIES, beam_size=beam_size)
    assert served["batch"] == expected
    # A sentence's translation does not depend on the rest of the batch.
    assert served["one_by_one"] == expected
    assert served["empty"] == [0]
    assert not served["imported_keras_transformer"]
    # A random model's output is long and varied, so equality above is not vacuous.
    assert len(set(expected)) > 1 and all(len(t) > 0 for t in expected)


@tensorflow_only
def test_failed_export_keeps_the_previous_one(tmp_path, tokenizer, monkeypatch):
    model = tiny_model()
    directory = export_serving(model, tokenizer, tmp_path / "serving", beam_size=1)
    before = sorted(p.relative_to(directory) for p in directory.rglob("*"))
    pb = (directory / "saved_model.pb").read_bytes()

    def broken_write_out(self, filepath, *args, **kwargs):
        with open(os.path.join(filepath, "saved_model.pb"), "wb") as file:
            file.write(b"half written")
        raise OSError("disk full")

    # `ExportArchive()` returns an instance of a backend-specific subclass.
    archive_class = type(keras.export.ExportArchive())
    monkeypatch.setattr(archive_class, "write_out", broken_write_out)
    with pytest.raises(OSError, match="disk full"):
        export_serving(tiny_model(), tokenizer, directory, beam_size=1)
    assert sorted(p.relative_to(directory) for p in directory.rglob("*")) == before
    assert (directory / "saved_model.pb").read_bytes() == pb
    assert [p.name for p in tmp_path.iterdir()] == ["serving"]  # no staging leftovers
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_serving(model, tokenizer, directory, overwrite=False)


@tensorflow_only
@pytest.mark.parametrize(
    "change, match",
    [
        ({"beam_size": 0}, "`beam_size` must be a positive integer"),
        ({"max_source_length": 1}, "`max_source_length` must be at least 2"),
        ({"model": "lm"}, "`model` must be a `Seq2SeqTransformer`"),
        ({"model": "other_vocabulary"}, "The tokenizer has 80 ids but the model predicts 90"),
        ({"tokenizer": "not a tokenizer"}, "`tokenizer` must be a `SubwordTokenizer`"),
    ],
)
def test_bad_arguments(tmp_path, tokenizer, change, match):
    models = {
        "lm": TransformerLM(80, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32),
        "other_vocabulary": Seq2SeqTransformer(
            90, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
            intermediate_dim=32,
        ),
    }  # fmt: skip
    arguments = {"model": tiny_model(), "tokenizer": tokenizer, "directory": tmp_path / "s"}
    arguments.update(change)
    if isinstance(arguments["model"], str):
        arguments["model"] = models[arguments["model"]]
    with pytest.raises(ValueError, match=match):
        export_serving(**arguments)
    assert not (tmp_path / "s").exists()


@tensorflow_only
def test_mixed_precision_model_is_served_identically(tmp_path, tokenizer):
    model = tiny_model(dtype="mixed_bfloat16")
    directory = export_serving(model, tokenizer, tmp_path / "serving", beam_size=2)
    served = load_in_fresh_process(directory, QUERIES[:2])
    assert served["batch"] == translate(model, tokenizer, QUERIES[:2], beam_size=2)
