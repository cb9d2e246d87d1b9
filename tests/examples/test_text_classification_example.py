"""The classification example end to end on small subsets: pretrain, train, predict, errors."""

import os
import subprocess

import numpy as np
import pytest

from examples.text_classification import predict, pretrain, train
from examples.text_classification.data import load_sst2
from keras_transformer.models import MaskedLM, TransformerClassifier, TransformerLM
from keras_transformer.saving import load_pretrained
from tests.examples.example_runs import CLASSIFICATION_SMALL
from tests.fresh_python import run_python
from tests.saved_model_loader import classify_in_fresh_process

SMALL = CLASSIFICATION_SMALL


def run_cli(module, *args, stdin=None):
    """Runs `python -m examples.text_classification.<module>` and returns the process."""
    return run_python(
        "-m",
        f"examples.text_classification.{module}",
        *args,
        input=stdin,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def run_main(main, *args, capsys):
    """Runs a command's `main(args)` in this process, as its `python -m` would; returns a
    `CompletedProcess` with its exit status and what it wrote. One real process per command
    (see `run_cli`) shows the entry point does the same."""
    try:
        main(list(args))
        returncode = 0
    except SystemExit as exit_info:
        returncode = exit_info.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, returncode, out, err)


def assert_one_line_error(process, *fragments):
    assert process.returncode == 2, process.stderr[-2000:]
    lines = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def trained(classification_quick_run):
    return classification_quick_run


def test_quick_path_learns_well_above_chance(trained):
    output, scores = trained
    # SST-2 dev is balanced (444 / 428): chance is ~51%.
    assert scores["dev"]["count"] == 872
    assert scores["dev"]["accuracy"] > 0.68
    assert 0.6 < scores["dev"]["f1"] <= 1.0
    for name in ("training_curves.png", "attention.png", "model/metadata.json"):
        assert (output / name).is_file(), name
    assert not (output / "backup").exists()  # BackupAndRestore removes it after a full run


def test_saved_classifier_scores_and_predicts_identically(trained):
    output, scores = trained
    bundle = load_pretrained(output / "model")
    assert isinstance(bundle.model, TransformerClassifier)
    assert bundle.metadata["scores"] == scores
    assert bundle.metadata["labels"] == ["negative", "positive"]
    texts, labels = load_sst2("dev")
    results = predict.predict(bundle, texts)
    predicted = np.array([["negative", "positive"].index(label) for label, _ in results])
    assert round(float(np.mean(predicted == labels)), 4) == scores["dev"]["accuracy"]
    assert all(0.5 <= probability <= 1.0 for _, probability in results)


def test_predict_command_reads_arguments_files_and_stdin(trained, tmp_path, capsys):
    model = str(trained[0] / "model")
    texts = ["a gorgeous , witty , seductive movie .", "a dull , lifeless mess ."]
    by_arguments = run_main(predict.main, "--model", model, *texts, capsys=capsys)
    assert by_arguments.returncode == 0, by_arguments.stderr[-2000:]
    lines = by_arguments.stdout.splitlines()
    assert [line.split("\t")[2] for line in lines] == texts
    expected = predict.predict(load_pretrained(model), texts)
    assert [line.split("\t")[:2] for line in lines] == [[a, f"{b:.4f}"] for a, b in expected]
    assert all(0.5 <= float(line.split("\t")[1]) <= 1 for line in lines)
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n\n", encoding="utf-8")
    by_file = run_main(predict.main, "--model", model, "--file", str(path), capsys=capsys)
    assert by_file.stdout.splitlines() == lines
    # The real command, reading standard input.
    stdin = "\n".join(texts) + "\n"
    assert run_cli("predict", "--model", model, stdin=stdin).stdout.splitlines() == lines


def test_predict_command_rejects_bad_input_in_one_line(trained, tmp_path, capsys):
    output = trained[0]
    model = str(output / "model")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    broken = tmp_path / "serving"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    for args, fragments in (
        (["--model", model, "--file", str(empty)], ["no text to classify"]),
        (["--model", model, "--file", str(tmp_path / "missing.txt")], ["does not exist"]),
        (["--model", str(output), "a film"], ["run folder", "model"]),
        (["--model", str(broken), "a film"], ["Cannot parse", "saved_model.pb"]),
        (["--model", str(tmp_path / "nothing"), "a film"], ["nothing"]),
    ):
        assert_one_line_error(run_main(predict.main, *args, capsys=capsys), *fragments)
    usage = run_main(predict.main, "--model", model, "--batch-size", "0", "a film", capsys=capsys)
    assert usage.returncode == 2 and "--batch-size must be a positive integer" in usage.stderr


def test_train_command_validates_flags_before_writing(tmp_path, capsys):
    output = tmp_path / "run"
    for flags, message in (
        (["--epochs", "0"], "--epochs must be a positive integer"),
        (["--dropout", "1.5"], "--dropout must be in [0, 1)"),
        (["--max-length", "2"], "--max-length must be at least 3"),
        (["--dataset", "imdb"], "--data-dir is required for IMDB"),
        (["--quick", "--dataset", "imdb"], "--quick runs on SST-2"),
        (["--init-from", str(tmp_path / "none")], "--init-from: no directory"),
        (["--lora-rank", "0"], "--lora-rank must be a positive integer"),
        (["--lora-rank", "4"], "--lora-rank fine-tunes a pretrained encoder: pass --init-from"),
    ):
        process = run_main(train.main, *flags, "--output-dir", str(output), capsys=capsys)
        assert process.returncode == 2, (flags, process.stderr[-1000:])
        assert message in process.stderr, (flags, process.stderr[-1000:])
    # The real command: one line on its standard error, nothing else (no native logs).
    wrong = run_cli(
        "train", "--dataset", "imdb", "--data-dir", str(tmp_path), "--output-dir", str(output)
    )
    assert_one_line_error(wrong, str(tmp_path))
    assert not output.exists()


def test_train_command_rejects_bad_data_in_one_line(tmp_path, capsys):
    output = tmp_path / "run"
    bad_label = tmp_path / "bad_label"
    bad_label.mkdir()
    (bad_label / "train.tsv").write_text("sentence\tlabel\na fine film \t1\nugh \t2\n")
    (bad_label / "dev.tsv").write_text("sentence\tlabel\nfine \t1\n")
    assert_one_line_error(
        run_main(
            train.main, "--data-dir", str(bad_label), "--output-dir", str(output), capsys=capsys
        ),
        "train.tsv",
        "line 3",
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "train.tsv").write_text("")
    (empty / "dev.tsv").write_text("sentence\tlabel\nfine \t1\n")
    assert_one_line_error(
        run_main(train.main, "--data-dir", str(empty), "--output-dir", str(output), capsys=capsys),
        "train.tsv",
    )
    assert not output.exists()


@pytest.fixture(scope="module")
def tiny_sst2(tmp_path_factory):
    """A 600-phrase SST-2 copy in the shared layout."""
    directory = tmp_path_factory.mktemp("sst2_small")
    texts, labels = load_sst2("train")
    rows = ["sentence\tlabel"] + [f"{t} \t{y}" for t, y in zip(texts[:600], labels[:600])]
    (directory / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    dev_texts, dev_labels = load_sst2("dev")
    rows = ["sentence\tlabel"] + [f"{t} \t{y}" for t, y in zip(dev_texts, dev_labels)]
    (directory / "dev.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return directory


def test_the_commands_refuse_the_other_kind_of_saved_model(trained, tmp_path, capsys):
    from keras_transformer.saving import save_pretrained

    classifier_dir = trained[0] / "model"
    tokenizer = load_pretrained(classifier_dir).tokenizer
    masked_lm = MaskedLM(
        tokenizer.vocabulary_size, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32
    )
    masked_lm_dir = save_pretrained(masked_lm, tmp_path / "masked_lm", tokenizer)
    capsys.readouterr()
    # A masked LM is not a classifier: predict says so in one line.
    assert_one_line_error(
        run_main(predict.main, "--model", str(masked_lm_dir), "a film", capsys=capsys),
        "MaskedLM",
        "not a classifier",
    )
    # A classifier's encoder fine-tunes again (e.g. IMDB, then SST-2); a language model
    # is no encoder for --init-from.
    assert isinstance(
        train.load_pretrained_encoder(str(classifier_dir)).model, TransformerClassifier
    )
    language_model = TransformerLM(
        tokenizer.vocabulary_size, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32
    )
    language_model_dir = save_pretrained(language_model, tmp_path / "lm", tokenizer)
    capsys.readouterr()
    assert_one_line_error(
        run_main(
            train.main,
            "--quick",
            "--init-from",
            str(language_model_dir),
            "--output-dir",
            str(tmp_path / "again"),
            capsys=capsys,
        ),  # fmt: skip
        "TransformerLM, not a masked LM, an ELECTRA pretrainer or a classifier",
    )
    assert not (tmp_path / "again").exists()


# Pretraining and fine-tuning by the commands, one after the other (about 25 s); in the
# default run the library steps are checked on their own: models/test_from_encoder.py,
# models/test_masked_lm.py, models/test_electra_pretrainer.py, the `pretrain` flags in
# examples/test_text_classification_cli.py and the test above (the commands' refusals).
@pytest.mark.slow
def test_pretrain_then_fine_tune_reuses_the_encoder(tiny_sst2, tmp_path, capsys):
    pretrained_dir = tmp_path / "pretrain"
    metadata = pretrain.main(
        ["--quick", "--sst2-dir", str(tiny_sst2), "--output-dir", str(pretrained_dir)] + SMALL
    )
    assert metadata["texts"] == {"sst2_train": 600, "imdb_train": 0}
    assert 0 <= metadata["masked_accuracy"] <= 1
    bundle = load_pretrained(pretrained_dir / "model")
    assert isinstance(bundle.model, MaskedLM) and bundle.tokenizer.mask_id == 4
    tuned_dir = tmp_path / "tuned"
    train.main(
        [
            "--quick",
            "--data-dir",
            str(tiny_sst2),
            "--epochs",
            "1",
            "--init-from",
            str(pretrained_dir / "model"),
            "--output-dir",
            str(tuned_dir),
        ]  # fmt: skip
        + SMALL
    )
    tuned = load_pretrained(tuned_dir / "model")
    assert tuned.metadata["init_from"] == str(pretrained_dir / "model")
    assert tuned.tokenizer.model_proto == bundle.tokenizer.model_proto
    assert tuned.model.encoder_config() == bundle.model.encoder_config()


def test_serving_export_classifies_like_the_predict_command(trained):
    output = trained[0]
    bundle = load_pretrained(output / "model")
    texts = ["a gorgeous , witty , seductive movie .", "a dull , lifeless mess .", "x " * 200]
    expected = predict.predict(bundle, texts)
    served = classify_in_fresh_process(output / "serving", texts)
    assert not served["imported_keras_transformer"]
    assert [["negative", "positive"][i] for i in served["label"]] == [e[0] for e in expected]
    probabilities = [max(row) for row in served["probabilities"]]
    np.testing.assert_allclose(probabilities, [p for _, p in expected], atol=1e-5)
    # The predict command reads the SavedModel too, with the same labels and probabilities.
    from_served = predict.predict_served(str(output / "serving"), texts, batch_size=2)
    assert [label for label, _ in from_served] == [label for label, _ in expected]
    np.testing.assert_allclose([p for _, p in from_served], [p for _, p in expected], atol=1e-5)


def _bert_folder(directory):
    """A tiny random BERT masked LM with a WordPiece vocabulary of characters, as transformers
    writes it."""
    transformers = pytest.importorskip("transformers")
    from keras_transformer.saving import load_huggingface, save_huggingface
    from keras_transformer.text import WordPieceTokenizer

    characters = "abcdefghijklmnopqrstuvwxyz0123456789.,'!?-"
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters]
    vocabulary += [f"##{c}" for c in characters] + ["the", "a", "film", "movie", "good", "bad"]
    config = transformers.BertConfig(
        vocab_size=len(vocabulary), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=128,
    )  # fmt: skip
    transformers.BertForMaskedLM(config).save_pretrained(directory)
    model = load_huggingface(directory).model
    return save_huggingface(model, directory, WordPieceTokenizer(vocabulary))


def test_init_from_reads_a_hugging_face_bert_folder(tmp_path):
    from keras_transformer.text import WordPieceTokenizer

    bundle = train.load_pretrained_encoder(str(_bert_folder(tmp_path / "bert")))
    assert isinstance(bundle.model, MaskedLM) and bundle.model.num_token_types == 2
    assert isinstance(bundle.tokenizer, WordPieceTokenizer)


# The whole fine-tuning command on a BERT folder (WordPiece in tf.data), about 20 s.
@pytest.mark.slow
def test_fine_tune_a_hugging_face_bert_folder(tiny_sst2, tmp_path):
    folder = _bert_folder(tmp_path / "bert")
    scores = train.main(
        ["--quick", "--data-dir", str(tiny_sst2), "--epochs", "1", "--init-from", str(folder),
         "--pooling", "cls", "--output-dir", str(tmp_path / "tuned")] + SMALL
    )  # fmt: skip
    assert 0 <= scores["dev"]["accuracy"] <= 1
    tuned = load_pretrained(tmp_path / "tuned" / "model")
    assert type(tuned.tokenizer).__name__ == "WordPieceTokenizer"
    # Its SavedModel holds the WordPiece tokenizer in TensorFlow ops and classifies alike.
    texts = ["a gorgeous , witty , seductive movie .", "Crème brûlée: NAÏVE!", "x " * 200]
    expected = predict.predict(tuned, texts)
    served = predict.predict_served(str(tmp_path / "tuned" / "serving"), texts)
    assert [label for label, _ in served] == [label for label, _ in expected]
    np.testing.assert_allclose([p for _, p in served], [p for _, p in expected], atol=1e-5)
