"""The extrapolation example: its evaluation, its flags, and (slow) a quick run."""

import gzip
import json
import math

import numpy as np
import pytest

from examples.positions import extrapolation


def test_every_length_scores_the_same_targets():
    tokens = np.arange(1, 8 * 4 + 2, dtype="int32") % 5
    seen = []

    def uniform(inputs):
        seen.append(inputs.size)
        return np.zeros((*inputs.shape, 5), "float32")

    for length in (4, 8, 16, 32):
        assert math.isclose(extrapolation.perplexity(uniform, tokens, length), 5.0)
    # The same 32 targets at each length (8 windows of 4 tokens or 1 window of 32).
    assert seen == [32, 32, 32, 32]
    with pytest.raises(ValueError, match="fewer than the 65 needed"):
        extrapolation.evaluation_tokens(tokens, 32, 2)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--positions", "relative"], "--positions must list some of"),
        (["--hidden-dim", "12", "--num-heads", "4"], "must be an even integer"),
        (["--steps", "0"], "--steps must be a positive integer"),
    ],
)
def test_bad_flags(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        extrapolation.parse_args(["--data-dir", str(tmp_path), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_translation_takes_position():
    from examples.translation import train

    assert train.parse_args(["--quick", "--position", "rotary"]).position == "rotary"


def _fake_imdb(directory, count):
    rng = np.random.default_rng(0)
    words = "the a film movie good bad plot actor scene story great awful long".split()
    for split in ("train", "test"):
        with gzip.open(directory / f"{split}.jsonl.gz", "wt", encoding="utf-8") as file:
            for i in range(count):
                text = " ".join(rng.choice(words, 60)) + ". <br />The end."
                record = {"id": i, "rating": 8, "label": 1, "text": text}
                file.write(json.dumps(record) + "\n")


@pytest.mark.slow
def test_quick_run_writes_table_and_figure(tmp_path):
    _fake_imdb(tmp_path, 40)
    output = tmp_path / "out"
    argv = ["--quick", "--data-dir", str(tmp_path), "--output-dir", str(output)]
    argv += ["--positions", "learned,alibi", "--steps", "3", "--vocabulary-size", "300"]
    results = extrapolation.main(argv + ["--train-reviews", "40", "--eval-reviews", "40"])
    assert sorted(results) == ["alibi", "learned"]
    for row in results.values():
        assert sorted(row["perplexity"], key=int) == ["16", "32", "64", "128"]
        assert all(math.isfinite(p) and p > 1 for p in row["perplexity"].values())
    saved = json.loads((output / "results.json").read_text())
    assert saved["results"] == results
    assert (output / "extrapolation.png").stat().st_size > 1000
