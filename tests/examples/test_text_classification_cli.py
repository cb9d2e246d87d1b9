"""The classification commands' flags: checked before anything is written, in one line."""

import pytest

from examples.text_classification import pretrain, train


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--mesh", "4x"], "--mesh must be DATAxMODEL or DATA with positive sizes, e.g. 8 or 2x4"),
        (["--mesh", "0x2"], "e.g. 8 or 2x4; got '0x2'"),
        (["--mesh", "eight"], "got 'eight'"),
        # --quick batches 64 texts: 3 replicas cannot share them evenly.
        (["--mesh", "3"], "--batch-size 64 must be a multiple of the mesh's 3 data-parallel"),
        (["--mesh", "3x2"], "(--mesh 3x2), which split each batch evenly; pass e.g. --batch-size"),
        (["--mesh", "8", "--batch-size", "4"], "pass e.g. --batch-size 8"),
    ],
)
def test_train_rejects_a_bad_mesh_in_one_line_before_writing(argv, message, capsys, tmp_path):
    output = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--quick", "--output-dir", str(output), *argv])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error: " in error and message in error, error
    assert not output.exists()


def test_train_reads_a_mesh_as_data_by_model():
    assert train.parse_args(["--quick", "--mesh", "2x4"]).mesh == (2, 4)
    assert train.parse_args(["--quick", "--mesh", "8"]).mesh == (8, 1)
    assert train.parse_args(["--quick"]).mesh is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--objective", "bert"], "argument --objective: invalid choice: 'bert'"),
        (["--minutes", "0"], "--minutes must be positive; got 0.0"),
        (["--steps", "0"], "--steps must be a positive integer; got 0"),
        (["--warmup-fraction", "1"], "--warmup-fraction must be in [0, 1); got 1.0"),
        (["--mask-rate", "1.5"], "--mask-rate must be in (0, 1); got 1.5"),
        (["--tokenizer", "nowhere"], "--tokenizer: no subword.model in 'nowhere'"),
        (["--curve", "nowhere/curve.csv"], "--curve: no directory for 'nowhere/curve.csv'"),
    ],
)
def test_pretrain_rejects_bad_flags_in_one_line_before_writing(argv, message, capsys, tmp_path):
    output = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        pretrain.parse_args(["--quick", "--output-dir", str(output), *argv])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert sum(line.startswith("error:") or ": error: " in line for line in lines) == 1
    assert message in lines[-1], lines[-1]
    assert not output.exists()


def test_pretrain_objective_and_packing_flags():
    args = pretrain.parse_args(["--quick"])
    assert (args.objective, args.pack, args.steps) == ("mlm", False, None)
    args = pretrain.parse_args(["--quick", "--objective", "electra", "--pack", "--steps", "9"])
    assert (args.objective, args.pack, args.steps) == ("electra", True, 9)
    assert pretrain.OBJECTIVES[args.objective] == "replaced_token_detection"


def _huggingface_folder(tmp_path):
    """What `--init-from` reads to choose the recipe: a config.json naming a `model_type`."""
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    return str(folder)


def test_train_fine_tunes_a_hugging_face_folder_with_bert_recipe(tmp_path):
    folder = _huggingface_folder(tmp_path)
    args = train.parse_args(["--init-from", folder])
    recipe = (args.learning_rate, args.epochs, args.batch_size, args.warmup_fraction)
    assert recipe == (5e-5, 2, 32, 0.1)
    assert (args.max_length, args.dropout, args.max_length_given) == (64, None, False)
    assert train.parse_args(["--init-from", folder, "--lora-rank", "8"]).learning_rate == 5e-4
    assert train.parse_args(["--init-from", folder, "--dataset", "imdb", "--data-dir", folder]
                            ).max_length == 512  # fmt: skip
    # Every flag still wins.
    given = train.parse_args(
        ["--init-from", folder, "--learning-rate", "3e-5", "--epochs", "3", "--batch-size",
         "16", "--warmup-fraction", "0", "--dropout", "0.2", "--max-length", "128"]
    )  # fmt: skip
    assert (given.learning_rate, given.epochs, given.batch_size) == (3e-5, 3, 16)
    assert (given.warmup_fraction, given.dropout, given.max_length) == (0.0, 0.2, 128)


def test_train_keeps_the_from_scratch_recipe_elsewhere(tmp_path):
    scratch = train.parse_args([])
    recipe = (scratch.learning_rate, scratch.epochs, scratch.batch_size, scratch.warmup_fraction)
    assert recipe == (1e-3, 8, 64, 0.06) and scratch.dropout == 0.1
    # An encoder pretrained by `pretrain` (no config.json) fine-tunes at the same rate.
    ours = tmp_path / "model"
    ours.mkdir()
    assert train.parse_args(["--init-from", str(ours)]).learning_rate == 1e-3


class _Encoder:
    position, max_sequence_length = "learned", 40


def test_train_fits_the_length_to_the_learned_positions(tmp_path):
    folder = _huggingface_folder(tmp_path)
    args = train.parse_args(["--init-from", folder])
    train.fit_length_to_positions(args, _Encoder())
    assert args.max_length == 40
    args = train.parse_args(["--init-from", folder, "--max-length", "64"])
    with pytest.raises(ValueError, match="--max-length 64 exceeds the 40 positions the encoder"):
        train.fit_length_to_positions(args, _Encoder())
