"""benchmarks/real_checkpoint.py on a tiny folder as transformers writes it: ids, hidden
states and sentence embeddings equal, and a changed weight caught."""

import json
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import real_checkpoint  # noqa: E402


def _folder(directory):
    """A tiny random BERT with a WordPiece vocabulary, written by transformers and by us."""
    transformers = pytest.importorskip("transformers")
    from keras_transformer.saving import load_huggingface, save_huggingface
    from keras_transformer.text import WordPieceTokenizer

    characters = "abcdefghijklmnopqrstuvwxyz0123456789.,'!?-()"
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters]
    vocabulary += [f"##{c}" for c in characters] + ["the", "a", "film", "movie", "it", "##s"]
    config = transformers.BertConfig(
        vocab_size=len(vocabulary), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=512,
    )  # fmt: skip
    transformers.BertModel(config).save_pretrained(directory)
    with pytest.warns(UserWarning, match="no tokenizer files"):
        model = load_huggingface(directory).model
    folder = save_huggingface(model, directory, WordPieceTokenizer(vocabulary))
    # A sentence-transformers folder: mean pooling, then Normalize.
    kinds = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    steps = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(kinds)
    ]
    (folder / "modules.json").write_text(json.dumps(steps))
    (folder / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": 16, "pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder


def test_a_folder_agrees_with_transformers_and_a_changed_weight_does_not(tmp_path, monkeypatch):
    folder = str(_folder(tmp_path / "bert"))
    argv = ["--folder", folder, "--sentences", "40", "--batch-size", "16", "--no-record"]
    assert real_checkpoint.main(argv)
    # Our encoder 1e-3 away from the checkpoint: the comparison must see it.
    import keras_transformer.saving

    load = keras_transformer.saving.load_huggingface

    def load_and_change(directory):
        bundle = load(directory)
        # The last block's last layer norm: its offset reaches the hidden states unchanged.
        beta = [v for v in bundle.model.encoder.weights if v.path.endswith("beta")][-1]
        beta.assign(beta + 1e-3)
        return bundle

    monkeypatch.setattr(keras_transformer.saving, "load_huggingface", load_and_change)
    assert not real_checkpoint.main(argv)


def test_a_folder_without_config_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        real_checkpoint.parse_args(["--folder", str(tmp_path)])
    assert "--folder: no config.json in" in capsys.readouterr().err
