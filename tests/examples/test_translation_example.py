"""The translation example end to end on a tiny subset: train, score, save, reload."""

import math

import pytest

from examples.translation import train
from examples.translation import translate as translate_cli
from examples.translation.translator import translate
from keras_transformer.saving import load_pretrained
from tests.saved_model_loader import load_all_in_fresh_process


@pytest.fixture
def quick_run(translation_quick_run):
    return translation_quick_run[:2]


# Blank lines, and a 2,000-word sentence both cut to their first 128 source tokens.
SENTENCE = "A dog runs on the beach."
EDGE_SENTENCES = ["", "   ", SENTENCE, " ".join([SENTENCE] * 400)]


@pytest.fixture(scope="module")
def served(translation_quick_run):
    """The quick run's SavedModel in a fresh process: the saved samples, the edge sentences."""
    output = translation_quick_run[0]
    samples = load_pretrained(output / "model").metadata["samples"]
    jobs = [
        ("translate", output / "serving", [sample["source"] for sample in samples]),
        ("translate", output / "serving", EDGE_SENTENCES),
    ]
    return dict(zip(["samples", "edge"], load_all_in_fresh_process(jobs)))


def test_quick_run_warns_about_nothing_that_is_not_the_users_concern(translation_quick_run):
    quick_run_warnings = translation_quick_run[2]
    # Keras warned "Your input ran out of data" after every validation pass (its length was
    # unknown) and that `shuffle=True` is ignored for a dataset.
    assert quick_run_warnings == []


def test_quick_run_reports_bleu_and_writes_files(quick_run):
    output, scores = quick_run
    for split in ("val", "test_2016_flickr"):
        for key in ("bleu", "bleu_lowercase"):
            assert 0.0 <= scores[split][key] <= 100.0 and math.isfinite(scores[split][key])
    for name in ("cross_attention.png", "position_table.png", "model/metadata.json"):
        assert (output / name).is_file(), name
    assert len(list((output / "checkpoints").glob("*.weights.h5"))) == 2


def test_saved_model_translates_identically(quick_run):
    output, scores = quick_run
    bundle = load_pretrained(output / "model")
    assert bundle.metadata["scores"] == scores
    assert bundle.metadata["command"].startswith("python -m examples.translation.train --quick")
    samples = bundle.metadata["samples"]
    reloaded = translate(
        bundle.model,
        bundle.tokenizer,
        [sample["source"] for sample in samples],
        beam_size=bundle.metadata["beam_size"],
        length_penalty=bundle.metadata["length_penalty"],
    )
    assert reloaded == [sample["translation"] for sample in samples]


def test_translate_command_prints_the_saved_translations(quick_run, capsys):
    output, _ = quick_run
    samples = load_pretrained(output / "model").metadata["samples"]
    argv = ["--model", str(output / "model")] + [sample["source"] for sample in samples]
    translations = translate_cli.main(argv)
    assert translations == [sample["translation"] for sample in samples]
    assert capsys.readouterr().out.splitlines() == translations


def test_translate_command_reports_a_bad_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        translate_cli.main(["--model", str(tmp_path / "missing"), "A dog."])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("error: No pretrained directory")


def test_serving_export_translates_identically(quick_run, served):
    output, _ = quick_run
    samples = load_pretrained(output / "model").metadata["samples"]
    assert served["samples"]["batch"] == [sample["translation"] for sample in samples]
    assert not served["samples"]["imported_keras_transformer"]


def test_too_high_min_tokens_per_batch_is_reported(tmp_path, capsys):
    # 100 short pairs fill no batch up to 4,000 tokens: every batch is dropped.
    argv = [
        "--quick",
        "--train-pairs", "100",
        "--eval-pairs", "2",
        "--vocabulary-size", "400",
        "--tokens-per-batch", "4096",
        "--min-tokens-per-batch", "4000",
        "--output-dir", str(tmp_path),
    ]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        train.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "fewer than --min-tokens-per-batch=4000 tokens. Lower it" in error[0]
    assert not any(tmp_path.iterdir())  # nothing written before the inputs are known good


def test_translate_command_and_saved_model_agree_on_edge_input(quick_run, served, capsys):
    output, _ = quick_run
    translations = translate_cli.main(["--model", str(output / "model"), *EDGE_SENTENCES])
    assert translations[:2] == ["", ""] and translations[2] and translations[3]
    assert served["edge"]["batch"] == translations
