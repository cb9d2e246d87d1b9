"""`load_huggingface` refuses a bad config.json by its keys, before building anything.

Two kinds of fault, each refused with the config's key (not our argument's name):
a value no model can have (`hidden_size: -3`), and a size the tensors do not have
(more layers than the file holds, a wider vocabulary). The second is read from the
safetensors header alone: the tests replace the model classes and the reading of the
tensors' values with functions that fail, so a refusal that came after either fails.

Offline: tiny checkpoints written by transformers, their config.json then edited.
"""

import json
import re
import shutil
import time
import tracemalloc
import warnings

import pytest

from keras_transformer.saving import PretrainedDirectoryError, load_huggingface
from keras_transformer.saving import huggingface_bert as bert_module
from keras_transformer.saving import huggingface_gpt2 as gpt2_module
from keras_transformer.saving import huggingface_marian as marian_module
from keras_transformer.saving.safetensors_files import WeightFiles

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


def _bert(directory, architecture="BertForMaskedLM"):
    config = transformers.BertConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
    )
    getattr(transformers, architecture)(config).save_pretrained(directory)


def _gpt2(directory, **options):
    config = transformers.GPT2Config(
        vocab_size=60, n_embd=16, n_layer=2, n_head=2, n_positions=32, **options
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(directory)


def _marian(directory, share=True):
    config = transformers.MarianConfig(
        vocab_size=60,
        decoder_vocab_size=None if share else 50,
        share_encoder_decoder_embeddings=share,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=49,
        eos_token_id=0,
        decoder_start_token_id=49,
    )
    transformers.MarianMTModel(config).save_pretrained(directory)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One tiny checkpoint of each kind, written once; each test edits a copy."""
    root = tmp_path_factory.mktemp("checkpoints")
    _bert(root / "bert")
    _bert(root / "bert_model", "BertModel")
    _bert(root / "bert_classifier", "BertForSequenceClassification")
    _gpt2(root / "gpt2")
    _gpt2(root / "gpt2_inner", n_inner=24)
    _marian(root / "marian")
    _marian(root / "marian_unshared", share=False)
    return root


def _edited(folders, tmp_path, name, **changes):
    directory = tmp_path / name
    shutil.copytree(folders / name, directory)
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))
    return directory


@pytest.fixture
def nothing_built(monkeypatch):
    """Fails a test whose load builds a model or reads the tensors' values."""

    def fail(*args, **kwargs):
        raise AssertionError("built a model or read the tensors before refusing the config")

    for module, names in (
        (bert_module, ("MaskedLM", "TransformerClassifier")),
        (gpt2_module, ("TransformerLM",)),
        (marian_module, ("Seq2SeqTransformer",)),
    ):
        for name in names:
            monkeypatch.setattr(module, name, fail)
    monkeypatch.setattr(WeightFiles, "tensors", fail)


def _refusal(directory, allow_pickle=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tokenizer files
        with pytest.raises(PretrainedDirectoryError) as error:
            load_huggingface(directory, allow_pickle=allow_pickle)
    return str(error.value)


# (folder, {key: bad value}, what the message says besides the key and the value)
BAD_VALUES = [
    ("bert", {"hidden_size": -3}, "positive integer divisible by `num_attention_heads` (2)"),
    ("bert", {"hidden_size": 15}, "positive integer divisible by `num_attention_heads` (2)"),
    ("bert", {"num_attention_heads": 0}, "positive integer"),
    ("bert", {"intermediate_size": 0}, "positive integer"),
    ("bert", {"vocab_size": 0}, "positive integer"),
    ("bert", {"max_position_embeddings": "512"}, "positive integer"),
    ("bert", {"num_hidden_layers": True}, "positive integer"),
    ("bert", {"type_vocab_size": 0}, "positive integer"),
    ("bert", {"layer_norm_eps": -1e-12}, "positive number"),
    ("bert", {"hidden_dropout_prob": 1.5}, "number in [0, 1)"),
    ("bert", {"pad_token_id": -1}, "non-negative integer token id or null"),
    ("bert_classifier", {"num_labels": 0}, "positive integer"),
    ("gpt2", {"n_embd": 15}, "positive integer divisible by `n_head` (2)"),
    ("gpt2", {"n_head": -1}, "positive integer"),
    ("gpt2", {"n_layer": 0}, "positive integer"),
    ("gpt2", {"n_positions": 0}, "positive integer"),
    ("gpt2", {"vocab_size": 0}, "positive integer"),
    ("gpt2", {"n_inner": 0}, "positive integer"),
    ("gpt2", {"layer_norm_epsilon": 0}, "positive number"),
    ("gpt2", {"eos_token_id": "<eos>"}, "non-negative integer token id or null"),
    ("marian", {"d_model": 15}, "positive integer divisible by `encoder_attention_heads` (2)"),
    ("marian", {"encoder_layers": 0}, "positive integer"),
    ("marian", {"encoder_ffn_dim": -1, "decoder_ffn_dim": -1}, "positive integer"),
    ("marian", {"vocab_size": 0}, "positive integer"),
    ("marian", {"max_position_embeddings": 0}, "positive integer"),
    ("marian", {"dropout": 1.0}, "number in [0, 1)"),
    ("marian", {"eos_token_id": -2}, "non-negative integer token id or null"),
    ("marian_unshared", {"decoder_vocab_size": 0}, "positive integer"),
]


@pytest.mark.parametrize(
    "name, changes, says",
    BAD_VALUES,
    ids=[
        f"{name}-{next(iter(changes))}={list(changes.values())[0]}"
        for name, changes, _ in BAD_VALUES
    ],
)
def test_a_bad_value_is_named_by_its_config_json_key(
    folders, tmp_path, nothing_built, name, changes, says
):
    directory = _edited(folders, tmp_path, name, **changes)
    message = _refusal(directory)
    key, value = next(iter(changes.items()))
    assert f"'{directory / 'config.json'}'" in message
    assert f"`{key}` must be a {says}; got {value!r}" in message


def test_every_bad_value_is_named_in_one_message(folders, tmp_path, nothing_built):
    directory = _edited(
        folders, tmp_path, "bert", hidden_size=-3, intermediate_size=0, layer_norm_eps="small"
    )
    message = _refusal(directory)
    for expected in (
        "`hidden_size` must be a positive integer divisible by `num_attention_heads` (2); got -3",
        "`intermediate_size` must be a positive integer; got 0",
        "`layer_norm_eps` must be a positive number; got 'small'",
    ):
        assert expected in message
    assert "hidden_dim" not in message


def test_a_missing_size_is_named(folders, tmp_path, nothing_built):
    directory = _edited(folders, tmp_path, "gpt2")
    path = directory / "config.json"
    config = json.loads(path.read_text())
    del config["n_positions"]
    path.write_text(json.dumps(config))
    assert "lacks 'n_positions', which a GPT2LMHeadModel config holds" in _refusal(directory)


# (folder, {key: size the tensors do not have}, what the message says)
WRONG_SIZES = [
    (
        "bert",
        {"num_hidden_layers": 12},
        "config.json says `num_hidden_layers` 12 but model.safetensors has tensors for 2 "
        "layers (bert.encoder.layer.0–1)",
    ),
    (
        "bert_model",
        {"num_hidden_layers": 1},
        "config.json says `num_hidden_layers` 1 but model.safetensors has tensors for 2 "
        "layers (encoder.layer.0–1)",
    ),
    (
        "bert",
        {"vocab_size": 40000},
        "config.json says `vocab_size` 40000 but 'bert.embeddings.word_embeddings.weight' "
        "is (60, 16)",
    ),
    (
        "bert_model",
        {"hidden_size": 32},
        "config.json says `hidden_size` 32 but 'embeddings.word_embeddings.weight' is (60, 16)",
    ),
    (
        "bert",
        {"intermediate_size": 64},
        "config.json says `intermediate_size` 64 but "
        "'bert.encoder.layer.0.intermediate.dense.weight' is (32, 16)",
    ),
    (
        "bert",
        {"max_position_embeddings": 512},
        "config.json says `max_position_embeddings` 512 but "
        "'bert.embeddings.position_embeddings.weight' is (32, 16)",
    ),
    (
        "bert",
        {"type_vocab_size": 3},
        "config.json says `type_vocab_size` 3 but "
        "'bert.embeddings.token_type_embeddings.weight' is (2, 16)",
    ),
    (
        "bert_classifier",
        {"id2label": {str(i): f"LABEL_{i}" for i in range(5)}},
        "config.json says `id2label` 5 but 'classifier.weight' is (3, 16)",
    ),
    (
        "gpt2",
        {"n_layer": 4},
        "config.json says `n_layer` 4 but model.safetensors has tensors for 2 layers "
        "(transformer.h.0–1)",
    ),
    (
        "gpt2",
        {"vocab_size": 50257},
        "config.json says `vocab_size` 50257 but 'transformer.wte.weight' is (60, 16)",
    ),
    (
        "gpt2",
        {"n_embd": 32},
        "config.json says `n_embd` 32 but 'transformer.wte.weight' is (60, 16)",
    ),
    (
        "gpt2",
        {"n_positions": 1024},
        "config.json says `n_positions` 1024 but 'transformer.wpe.weight' is (32, 16)",
    ),
    (
        "gpt2",
        {"n_inner": 48},
        "config.json says `n_inner` 48 but 'transformer.h.0.mlp.c_fc.weight' is (16, 64)",
    ),
    (
        "gpt2_inner",
        {"n_inner": None},
        "config.json says `n_inner` null (4 × `n_embd`: 64) but "
        "'transformer.h.0.mlp.c_fc.weight' is (16, 24)",
    ),
    (
        "marian",
        {"encoder_layers": 3},
        "config.json says `encoder_layers` 3 but model.safetensors has tensors for 2 layers "
        "(model.encoder.layers.0–1)",
    ),
    (
        "marian",
        {"decoder_layers": 1},
        "config.json says `decoder_layers` 1 but model.safetensors has tensors for 2 layers "
        "(model.decoder.layers.0–1)",
    ),
    (
        "marian",
        {"vocab_size": 58000},
        "config.json says `vocab_size` 58000 but 'model.shared.weight' is (60, 16)",
    ),
    (
        "marian",
        {"d_model": 32},
        "config.json says `d_model` 32 but 'model.shared.weight' is (60, 16)",
    ),
    (
        "marian",
        {"encoder_ffn_dim": 64, "decoder_ffn_dim": 64},
        "config.json says `encoder_ffn_dim` 64 but 'model.encoder.layers.0.fc1.weight' is (32, 16)",
    ),
    (
        "marian_unshared",
        {"decoder_vocab_size": 55},
        "config.json says `decoder_vocab_size` 55 but 'model.decoder.embed_tokens.weight' is "
        "(50, 16)",
    ),
]


@pytest.mark.parametrize(
    "name, changes, says",
    WRONG_SIZES,
    ids=[f"{name}-{next(iter(changes))}" for name, changes, _ in WRONG_SIZES],
)
def test_a_size_the_tensors_do_not_have_is_refused_from_the_header(
    folders, tmp_path, nothing_built, name, changes, says
):
    directory = _edited(folders, tmp_path, name, **changes)
    message = _refusal(directory)
    assert message.startswith(f"'{directory}': ")
    assert says in message


@pytest.mark.parametrize(
    "name, key, tensor",
    [
        ("bert", "vocab_size", "'bert.embeddings.word_embeddings.weight' is (60, 16)"),
        ("gpt2", "n_layer", "has tensors for 2 layers (transformer.h.0–1)"),
        ("marian", "encoder_ffn_dim", "'model.encoder.layers.0.fc1.weight' is (32, 16)"),
    ],
)
def test_a_huge_size_is_refused_in_bounded_time_and_memory(
    folders, tmp_path, nothing_built, name, key, tensor
):
    changes = {key: 10**12}
    if key == "encoder_ffn_dim":
        changes["decoder_ffn_dim"] = 10**12
    directory = _edited(folders, tmp_path, name, **changes)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        message = _refusal(directory)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 10
    assert peak < 20 * 2**20, peak
    assert f"`{key}` {10**12} but" in message and tensor in message


def test_the_shards_of_an_index_are_measured_from_their_headers(folders, tmp_path, nothing_built):
    directory = tmp_path / "sharded"
    config = transformers.BertConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    transformers.BertForMaskedLM(config).save_pretrained(directory, max_shard_size="10KB")
    assert (directory / "model.safetensors.index.json").is_file()
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "num_hidden_layers": 3}))
    message = _refusal(directory)
    assert (
        "config.json says `num_hidden_layers` 3 but the shards of model.safetensors.index.json "
        "has tensors for 2 layers (bert.encoder.layer.0–1)"
    ) in message


def test_a_pickle_file_is_measured_before_any_model_is_built(folders, tmp_path, monkeypatch):
    directory = _edited(folders, tmp_path, "gpt2", n_layer=3)
    model = transformers.GPT2LMHeadModel.from_pretrained(folders / "gpt2")
    (directory / "model.safetensors").unlink()
    torch.save(model.state_dict(), directory / "pytorch_model.bin")

    def fail(*args, **kwargs):
        raise AssertionError("built a model before refusing the config")

    monkeypatch.setattr(gpt2_module, "TransformerLM", fail)
    message = _refusal(directory, allow_pickle=True)
    assert re.search(
        r"`n_layer` 3 but pytorch_model\.bin has tensors for 2 layers \(transformer\.h\.0–1\)",
        message,
    )


def test_a_checkpoint_whose_sizes_agree_still_loads(folders):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("bert", "bert_model", "bert_classifier", "gpt2_inner"):
            assert load_huggingface(folders / name).model.num_layers == 2
        marian = load_huggingface(folders / "marian_unshared").model
        assert (marian.num_encoder_layers, marian.target_vocabulary_size) == (2, 50)
