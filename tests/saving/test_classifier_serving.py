"""Saving a `TransformerClassifier` and serving it as a text → label SavedModel."""

import keras
import numpy as np
import pytest

from keras_transformer.models import Seq2SeqTransformer, TransformerClassifier, TransformerLM
from keras_transformer.saving import export_serving, load_pretrained, save_pretrained
from keras_transformer.text import SubwordTokenizer
from keras_transformer.text.classification_dataset import tokenize_for_classification
from tests import tiny_models
from tests.saved_model_loader import load_all_in_fresh_process
from tests.saving.serving_probes import assert_refused, probe, run_probes

SENTENCES = [
    "A moving film with great acting.",
    "The plot was boring and the acting awful.",
    "Two hours of my life I will not get back.",
    "I loved every minute of this movie.",
] * 20
HEAD = "one two three four five "
TAIL = " nine ten eleven twelve."
# With max_length=12 and head_fraction=0.5, a long text keeps 5 pieces from its start and
# 5 from its end: LONG and LONG_OTHER_MIDDLE differ only in pieces that are cut.
LONG = HEAD + "the plot was boring and the acting awful" + TAIL
LONG_OTHER_MIDDLE = HEAD + "I loved every minute of this great movie" + TAIL
LONG_OTHER_TAIL = HEAD + "the plot was boring and the acting awful" + " I loved this movie."
QUERIES = [
    "A moving film.",
    "",
    "Ünïcode 😀 plot",
    "The acting was awful.",
    LONG,
    LONG_OTHER_MIDDLE,
    LONG_OTHER_TAIL,
]
MAX_LENGTH, HEAD_FRACTION = 12, 0.5
VOCABULARY_SIZE, NUM_CLASSES = 300, 3

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModel export needs TensorFlow"
)


@pytest.fixture(scope="module")
def tokenizer():
    words = (HEAD + TAIL).split()
    return SubwordTokenizer.train(SENTENCES + [" ".join(words)] * 20, VOCABULARY_SIZE)


def tiny_classifier(pooling="mean", dtype=None, **kwargs):
    return tiny_models.classifier(
        VOCABULARY_SIZE, NUM_CLASSES, pooling=pooling, dtype=dtype, **kwargs
    )


def keras_probabilities(model, tokenizer, texts, max_length=MAX_LENGTH):
    ids = tokenize_for_classification(tokenizer, texts, max_length, HEAD_FRACTION)
    logits = model(ids.to_tensor().numpy(), training=False)
    return np.asarray(keras.ops.softmax(keras.ops.cast(logits, "float32")), np.float64)


def test_pretrained_round_trip(tmp_path, tokenizer):
    model = tiny_classifier(pooling="cls")
    metadata = {"labels": ["negative", "neutral", "positive"], "max_length": 256}
    directory = save_pretrained(model, tmp_path / "run", tokenizer, metadata=metadata)
    bundle = load_pretrained(directory)
    assert isinstance(bundle.model, TransformerClassifier)
    assert bundle.model.get_config() == model.get_config()
    ids = tokenize_for_classification(tokenizer, QUERIES).to_tensor().numpy()
    logits = np.asarray(model(ids))
    assert logits.shape == (len(QUERIES), NUM_CLASSES) and np.ptp(logits) > 1e-3
    np.testing.assert_array_equal(np.asarray(bundle.model(ids)), logits)
    assert tokenize_for_classification(bundle.tokenizer, QUERIES).to_list() == (
        tokenize_for_classification(tokenizer, QUERIES).to_list()
    )
    assert bundle.metadata["labels"] == metadata["labels"]
    assert bundle.metadata["max_length"] == 256
    assert bundle.metadata["model_class"] == "TransformerClassifier"
    assert bundle.metadata["tokenizer_class"] == "SubwordTokenizer"


SERVED = [("mean", None), ("cls", None), ("mean", "mixed_bfloat16")]


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizer):
    """`{(pooling, dtype): (model, directory, results)}`: each classifier saved, loaded back
    and exported (the documented path), the exports called in one fresh process."""
    exports = {}
    for pooling, dtype in SERVED:
        folder = tmp_path_factory.mktemp(f"{pooling}-{dtype}")
        keras.utils.set_random_seed(1234)  # as a test of its own would start
        model = tiny_classifier(pooling=pooling, dtype=dtype)
        save_pretrained(model, folder / "run", tokenizer, metadata={"max_length": MAX_LENGTH})
        bundle = load_pretrained(folder / "run")
        directory = export_serving(
            bundle.model,
            bundle.tokenizer,
            folder / "serving",
            max_length=bundle.metadata["max_length"],
            head_fraction=HEAD_FRACTION,
        )
        exports[pooling, dtype] = model, directory
    results = load_all_in_fresh_process([("classify", exports[key][1], QUERIES) for key in SERVED])
    return {key: (*exports[key], result) for key, result in zip(SERVED, results)}


@tensorflow_only
@pytest.mark.parametrize("pooling, dtype", SERVED)
def test_served_probabilities_equal_the_keras_model(served, tokenizer, pooling, dtype):
    model, directory, served = served[pooling, dtype]
    assert (directory / "saved_model.pb").is_file()
    assert not served["imported_keras_transformer"]
    assert served["outputs"] == ["label", "probabilities"]
    assert served["dtypes"] == {"label": "int32", "probabilities": "float32"}
    probabilities = np.array(served["probabilities"])
    expected = keras_probabilities(model, tokenizer, QUERIES)
    assert probabilities.shape == (len(QUERIES), NUM_CLASSES)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-5)
    # A text's probabilities do not depend on the rest of the batch (its padding).
    np.testing.assert_allclose(served["one_by_one"], probabilities, rtol=0, atol=1e-5)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=0, atol=1e-6)
    assert served["label"] == np.argmax(probabilities, axis=1).tolist()
    assert served["empty"] == {
        "label": [[0], "int32"],
        "probabilities": [[0, NUM_CLASSES], "float32"],
    }
    # Long texts are cut head + tail: the middle is dropped, the end is kept.
    long = {text: probabilities[QUERIES.index(text)] for text in QUERIES[4:]}
    np.testing.assert_allclose(long[LONG], long[LONG_OTHER_MIDDLE], rtol=0, atol=1e-6)
    assert np.abs(long[LONG] - long[LONG_OTHER_TAIL]).max() > 1e-2  # measured: 0.09
    # Equality with the model is not vacuous: uncut, the long text scores differently.
    uncut = keras_probabilities(model, tokenizer, [LONG], max_length=64)[0]
    assert np.abs(long[LONG] - uncut).max() > 1e-2  # measured: 0.11-0.19


def test_long_queries_are_cut(tokenizer):
    ids = tokenize_for_classification(tokenizer, QUERIES[4:], MAX_LENGTH, HEAD_FRACTION)
    rows = ids.to_list()
    assert all(len(row) == MAX_LENGTH for row in rows)
    assert rows[0] == rows[1] and rows[0] != rows[2]
    assert len(tokenizer.tokenize(LONG).numpy()) > 2 * MAX_LENGTH


@tensorflow_only
def test_overwrite_refused_when_asked(tmp_path, tokenizer):
    (tmp_path / "serving").mkdir()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_serving(tiny_classifier(), tokenizer, tmp_path / "serving", overwrite=False)
    assert list((tmp_path / "serving").iterdir()) == []


@tensorflow_only
@pytest.mark.parametrize(
    "change, match",
    [
        ({"beam_size": 4}, r"`beam_size` does not apply to a TransformerClassifier.*`max_length`"),
        ({"length_penalty": 0.6}, "`length_penalty` does not apply to a TransformerClassifier"),
        ({"max_source_length": 64}, "`max_source_length` does not apply"),
        ({"model": "translation", "max_length": 64}, "`max_length` does not apply to a Seq2Seq"),
        ({"model": "translation", "head_fraction": 0.5}, "`head_fraction` does not apply"),
        ({"max_length": 2}, r"`max_length` must be an int >= 3.*max_length=2"),
        ({"head_fraction": 1.5}, r"`head_fraction` must be a float in \[0, 1\]"),
        ({"model": "learned"}, r"`max_length` \(256\) exceeds.*max_sequence_length=128"),
        ({"model": "learned", "max_length": 128}, None),
        ({"model": "other_vocabulary"}, "The tokenizer has 300 ids but the model embeds 90"),
        ({"model": "other_pad_id"}, r"`pad_id` \(1\) must be the tokenizer's \(0\)"),
        ({"tokenizer": "not a tokenizer"}, "`tokenizer` must be a `SubwordTokenizer`"),
    ],
)
def test_bad_arguments(tmp_path, tokenizer, change, match):
    models = {
        "translation": lambda: Seq2SeqTransformer(
            VOCABULARY_SIZE, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16,
            num_heads=2, intermediate_dim=32,
        ),
        "learned": lambda: tiny_classifier(position="learned", max_sequence_length=128),
        "other_vocabulary": lambda: TransformerClassifier(
            90, NUM_CLASSES, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32
        ),
        "other_pad_id": lambda: tiny_classifier(pad_id=1),
    }  # fmt: skip
    arguments = {"model": tiny_classifier(), "tokenizer": tokenizer, "directory": tmp_path / "s"}
    arguments.update(change)
    if isinstance(arguments["model"], str):
        arguments["model"] = models[arguments["model"]]()
    if match is None:  # The limit itself is accepted.
        assert export_serving(**arguments) == tmp_path / "s"
        return
    with pytest.raises(ValueError, match=match):
        export_serving(**arguments)
    assert not (tmp_path / "s").exists()


TEN_THOUSAND_WORDS = " ".join(["the plot was boring"] * 2500)
BLANKS = [" ", "   ", "\t\n", "\u00a0"]


@pytest.fixture(scope="module")
def edge(tmp_path_factory, tokenizer):
    """Edge inputs' results from a classifier's export, in one fresh process."""
    model = tiny_classifier()
    directory = export_serving(
        model,
        tokenizer,
        tmp_path_factory.mktemp("edge") / "serving",
        max_length=MAX_LENGTH,
        head_fraction=HEAD_FRACTION,
    )
    served = run_probes(
        directory,
        [
            probe("empty", [], via="signature"),
            probe("blank", BLANKS, via="signature"),
            probe("ten_thousand_words", [TEN_THOUSAND_WORDS]),
            probe("int_serve", [1, 2], "int32"),
            probe("int_signature", [1, 2], "int32", via="signature"),
            probe("matrix_signature", [QUERIES[:2]], via="signature"),
        ],
    )
    return {
        "served": served,
        "blank": keras_probabilities(model, tokenizer, BLANKS),
        "ten_thousand_words": keras_probabilities(model, tokenizer, [TEN_THOUSAND_WORDS]),
    }


@tensorflow_only
def test_edge_empty_batch(edge):
    assert edge["served"]["empty"] == {
        "label": {"shape": [0], "dtype": "int32", "values": []},
        "probabilities": {"shape": [0, NUM_CLASSES], "dtype": "float32", "values": []},
    }


@tensorflow_only
@pytest.mark.parametrize("name", ["blank", "ten_thousand_words"])
def test_edge_texts_are_classified_as_the_model_does(edge, name):
    served = edge["served"][name]
    expected = edge[name]
    assert served["probabilities"]["shape"] == [len(expected), NUM_CLASSES]
    np.testing.assert_allclose(served["probabilities"]["values"], expected, rtol=0, atol=1e-5)
    assert served["label"]["values"] == np.argmax(expected, axis=1).tolist()


@tensorflow_only
def test_edge_ten_thousand_words_are_cut_head_and_tail(edge, tokenizer):
    assert len(tokenizer.tokenize(TEN_THOUSAND_WORDS).numpy()) > 100 * MAX_LENGTH
    cut = tokenize_for_classification(tokenizer, [TEN_THOUSAND_WORDS], MAX_LENGTH, HEAD_FRACTION)
    assert cut.row_lengths().numpy().tolist() == [MAX_LENGTH]


@tensorflow_only
def test_edge_bad_inputs_are_refused(edge):
    served = edge["served"]
    assert_refused(
        served["int_serve"], "TypeError", "Can not cast TensorSpec(shape=(2,), dtype=tf.int32"
    )
    assert_refused(
        served["int_signature"],
        "InvalidArgumentError",
        "expected to be a string tensor but is a int32 tensor",
    )
    assert_refused(
        served["matrix_signature"],
        "InvalidArgumentError",
        "Shape of tensor sentences [1,2] is not compatible with expected shape [?]",
        "sentences_must_be_1d",
    )


def test_predict_command_loader_says_what_it_was_given(tmp_path, tokenizer):
    from examples.text_classification.predict import load_classifier

    run = tmp_path / "run"
    save_pretrained(tiny_classifier(), run / "model", tokenizer)
    (run / "training_log.csv").write_text("epoch,loss\n")
    bundle = load_classifier(str(run / "model"))
    assert isinstance(bundle.model, TransformerClassifier) and bundle.tokenizer is not None
    language_model = TransformerLM(
        VOCABULARY_SIZE, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32
    )
    cases = [
        (run, rf"'{run}' is a training run folder; the saved model is in '{run}/model'"),
        (
            save_pretrained(language_model, tmp_path / "lm", tokenizer),
            "holds a TransformerLM, not a classifier",
        ),
        (save_pretrained(tiny_classifier(), tmp_path / "bare"), "holds no tokenizer"),
        (tmp_path / "missing", r"No pretrained directory at .*missing': nothing exists"),
    ]
    for path, match in cases:
        with pytest.raises(ValueError, match=match):
            load_classifier(str(path))
