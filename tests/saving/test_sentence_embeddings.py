"""`sentence_embeddings`: a sentence-transformers folder's pooling, against transformers.

Offline: a tiny random `BertModel` and its WordPiece vocabulary, written by transformers,
with the files sentence-transformers adds beside them (`modules.json`, the Pooling step's
`config.json`, `sentence_bert_config.json`) written here. The reference is transformers'
hidden states, pooled and normalised by hand as sentence-transformers does.
"""

import json
import warnings

import numpy as np
import pytest

from keras_transformer.saving import (
    Pretrained,
    PretrainedDirectoryError,
    load_huggingface,
    sentence_embeddings,
)
from tests import tiny_models

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

WORDS = "a the dog cat runs sleeps on in grass park red ball and children laugh big small".split()
TEXTS = [
    "a dog runs",
    "the cat sleeps in the park",
    "children laugh",
    "a big red dog runs on the grass and the small cat sleeps",
    "ball",
]
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {
        "idx": 2,
        "name": "2",
        "path": "2_Normalize",
        "type": "sentence_transformers.models.Normalize",
    },
]


def _pooling_config(mode="mean", dimension=16):
    return {
        "word_embedding_dimension": dimension,
        "pooling_mode_cls_token": mode == "cls",
        "pooling_mode_mean_tokens": mode == "mean",
        "pooling_mode_max_tokens": mode == "max",
        "pooling_mode_mean_sqrt_len_tokens": False,
    }


def _write(directory, modules=MODULES, pooling="mean", max_seq_length=None):
    (directory / "modules.json").write_text(json.dumps(modules))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    (directory / "1_Pooling" / "config.json").write_text(json.dumps(_pooling_config(pooling)))
    if max_seq_length is not None:
        settings = {"max_seq_length": max_seq_length, "do_lower_case": False}
        (directory / "sentence_bert_config.json").write_text(json.dumps(settings))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random BertModel folder with its tokenizer, and transformers' model."""
    directory = tmp_path_factory.mktemp("sentence") / "minibert"
    directory.mkdir()
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    (directory / "vocab.txt").write_text("\n".join(vocabulary) + "\n")
    tokenizer = transformers.BertTokenizer(str(directory / "vocab.txt"))
    config = transformers.BertConfig(
        vocab_size=len(vocabulary),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=24,
    )
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.3)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model, tokenizer


def _theirs(checkpoint, texts, pooling="mean", normalize=True, max_length=24):
    """sentence-transformers' computation, by hand over transformers' hidden states."""
    _, model, tokenizer = checkpoint
    batch = tokenizer(
        texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    if pooling == "cls":
        pooled = hidden[:, 0]
    else:
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    if normalize:
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
    return pooled.numpy()


def _folder(checkpoint, tmp_path, **options):
    """A copy of the checkpoint's folder with sentence-transformers' files."""
    import shutil

    directory = tmp_path / "folder"
    shutil.copytree(checkpoint[0], directory)
    _write(directory, **options)
    return directory


def _load(directory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_huggingface(directory)


@pytest.mark.backend_agnostic
def test_mean_pooled_normalised_as_sentence_transformers(checkpoint, tmp_path):
    directory = _folder(checkpoint, tmp_path)
    ours = sentence_embeddings(directory, TEXTS, batch_size=2)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(ours, _theirs(checkpoint, TEXTS), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-6)
    # One text, or a bundle with its folder: the same numbers.
    np.testing.assert_allclose(sentence_embeddings(directory, TEXTS[1]), ours[1], atol=1e-6)
    bundle = _load(directory)
    again = sentence_embeddings(bundle, TEXTS, directory=directory, batch_size=64)
    np.testing.assert_allclose(again, ours, atol=1e-6)


def test_cls_pooling_without_normalize(checkpoint, tmp_path):
    modules = MODULES[:2]
    directory = _folder(checkpoint, tmp_path, modules=modules, pooling="cls")
    ours = sentence_embeddings(directory, TEXTS)
    expected = _theirs(checkpoint, TEXTS, pooling="cls", normalize=False)
    np.testing.assert_allclose(ours, expected, atol=1e-5)


def test_texts_are_cut_to_the_folders_max_seq_length(checkpoint, tmp_path):
    directory = _folder(checkpoint, tmp_path, max_seq_length=6)
    ours = sentence_embeddings(directory, TEXTS)
    np.testing.assert_allclose(ours, _theirs(checkpoint, TEXTS, max_length=6), atol=1e-5)
    shorter = sentence_embeddings(directory, TEXTS, max_length=4)
    np.testing.assert_allclose(shorter, _theirs(checkpoint, TEXTS, max_length=4), atol=1e-5)


def test_explicit_arguments_take_precedence_over_the_folder(checkpoint, tmp_path):
    directory = _folder(checkpoint, tmp_path)
    bundle = _load(directory)
    ours = sentence_embeddings(bundle, TEXTS, pooling="cls", normalize=False)
    expected = _theirs(checkpoint, TEXTS, pooling="cls", normalize=False)
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    mean = sentence_embeddings(directory, TEXTS, normalize=False)
    np.testing.assert_allclose(mean, _theirs(checkpoint, TEXTS, normalize=False), atol=1e-5)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            {"pooling": "max"},
            r"asks for `pooling_mode_max_tokens`; this library computes one of "
            r"`pooling_mode_mean_tokens`",
        ),
        (
            {
                "modules": [
                    *MODULES[:2],
                    {**MODULES[2], "type": "sentence_transformers.models.Dense"},
                ]
            },
            r"lists sentence_transformers\.models\.Dense; this library computes a Transformer",
        ),
        ({"modules": MODULES[1:]}, r"computes a Transformer, then a Pooling"),
    ],
    ids=["max-pooling", "dense-step", "no-transformer-first"],
)
def test_steps_we_do_not_compute_are_refused_by_name(checkpoint, tmp_path, edit, message):
    directory = _folder(checkpoint, tmp_path, **edit)
    with pytest.raises(PretrainedDirectoryError, match=message):
        sentence_embeddings(directory, TEXTS)


def test_two_pooling_modes_at_once_are_refused(checkpoint, tmp_path):
    directory = _folder(checkpoint, tmp_path)
    path = directory / "1_Pooling" / "config.json"
    path.write_text(json.dumps({**_pooling_config(), "pooling_mode_cls_token": True}))
    with pytest.raises(
        PretrainedDirectoryError, match="`pooling_mode_mean_tokens`, `pooling_mode_cls_token`"
    ):
        sentence_embeddings(directory, TEXTS)


def test_what_cannot_be_pooled_is_refused(checkpoint, tmp_path):
    directory = _folder(checkpoint, tmp_path)
    bundle = _load(directory)
    with pytest.raises(PretrainedDirectoryError, match="nothing says how to pool"):
        sentence_embeddings(bundle, TEXTS)
    with pytest.raises(PretrainedDirectoryError, match="has no modules.json"):
        sentence_embeddings(checkpoint[0], TEXTS)
    with pytest.raises(ValueError, match="beyond the model's 24 positions"):
        sentence_embeddings(directory, TEXTS, max_length=25)
    with pytest.raises(ValueError, match="`pooling` must be one of 'mean', 'cls'"):
        sentence_embeddings(directory, TEXTS, pooling="max")
    lm = Pretrained(tiny_models.lm(len(WORDS) + 5), bundle.tokenizer, {})
    with pytest.raises(ValueError, match="encoder-only.*TransformerLM"):
        sentence_embeddings(lm, TEXTS, pooling="mean")
    with pytest.raises(ValueError, match="no tokenizer"):
        sentence_embeddings(Pretrained(bundle.model, None, {}), TEXTS, pooling="mean")
