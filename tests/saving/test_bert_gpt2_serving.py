"""`export_serving` with WordPiece (BERT) and byte-level BPE (GPT-2) tokenizers, and LMs.

Offline: tiny BERT and GPT-2 checkpoints are made with transformers (random weights, the
tokenizer files written beside them) and read with `load_huggingface`, as a user's folders
would be. A BERT classifier (`TransformerClassifier.from_encoder`) and a GPT-2 classifier
served on raw strings must give the Keras model's probabilities on the ids the Python
tokenizer gives (the training pipeline's layout and head + tail cut); a served language
model's continuation must be `generate`'s greedy one, detokenized. One test loads the
exports in a fresh interpreter that imports TensorFlow, then tensorflow-text, never this
library.
"""

import functools
import json
import textwrap
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models import TransformerClassifier
from keras_transformer.saving import export_serving, load_huggingface
from keras_transformer.text.classification_dataset import tokenize_for_classification
from tests import tiny_models
from tests.fresh_python import run_python

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
tokenizers = pytest.importorskip("tokenizers")

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModel export needs TensorFlow"
)

WORDS = (
    "a man in blue shirt is playing the guitar two dogs are running through snow and little "
    "girl red balloon flies away movie was boring acting awful loved every minute of this"
).split()
HEAD = "one two three four five six "
TAIL = " nine ten eleven twelve thirteen fourteen"
MIDDLE = "the movie was boring and the acting awful"
# max_length=16, head_fraction=0.25: a long text keeps 4 pieces from its start and 10 from
# its end, so LONG and LONG_OTHER_MIDDLE differ only in pieces that are cut.
LONG = HEAD + MIDDLE + TAIL
LONG_OTHER_MIDDLE = HEAD + "I loved every minute of this great film" + TAIL
MAX_LENGTH, HEAD_FRACTION, NUM_CLASSES = 16, 0.25, 3
QUERIES = [
    "A man in a blue shirt is playing the guitar.",
    "Two dogs are running through the snow!",
    "",
    "   ",
    "\t\n\u3000",
    "Café NAÏVE Ünïcode é",
    "中文 and 日本語",
    "punctuation!!! (brackets) [more] ... ?",
    "x [MASK] y [SEP]",
    "a" * 120 + " man",
    LONG,
    LONG_OTHER_MIDDLE,
]
PROMPTS = [
    "A man in a blue shirt",
    "Two dogs are running through the snow, and a little girl",
    " leading space",
    "Ünïcode 😀 and 中文",
    "x",
]
MAX_NEW_TOKENS, MAX_PROMPT_LENGTH = 8, 6
CORPUS = [
    "A man in a blue shirt is playing the guitar.",
    "Two dogs are running through the snow, and a little girl's red balloon flies away!",
    "The movie was boring and the acting awful. I loved every minute of this.",
    "Ünïcode 😀 and 中文, naïve café, 1,000.5",
] * 10


def randomize(model, seed=0, scale=0.3):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return model.eval()


def load(directory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_huggingface(directory)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny BERT folder (vocab.txt, random weights) read by `load_huggingface`."""
    directory = tmp_path_factory.mktemp("bert")
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789") + list("!?.,()[]中文日本語é")
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters]
    vocabulary += ["##" + c for c in letters[:36]] + sorted(set(WORDS) - set(letters))
    config = transformers.BertConfig(
        vocab_size=len(vocabulary),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    randomize(transformers.BertForMaskedLM(config)).save_pretrained(directory)
    (directory / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    return load(directory)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """A tiny GPT-2 folder (a byte-level BPE trained here, random weights), loaded."""
    directory = tmp_path_factory.mktemp("gpt2")
    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        CORPUS, vocab_size=320, min_frequency=2, special_tokens=[], show_progress=False
    )
    trainer.save_model(str(directory))
    vocabulary = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    end = vocabulary["<|endoftext|>"] = len(vocabulary)
    (directory / "vocab.json").write_text(json.dumps(vocabulary), encoding="utf-8")
    config = transformers.GPT2Config(
        vocab_size=len(vocabulary),
        n_embd=16,
        n_layer=1,
        n_head=2,
        n_positions=32,
        bos_token_id=end,
        eos_token_id=end,
    )
    randomize(transformers.GPT2LMHeadModel(config)).save_pretrained(directory)
    return load(directory)


def keras_probabilities(model, tokenizer, texts, max_length=MAX_LENGTH):
    """The Keras model on the Python tokenizer's ids, laid out as in training."""
    ids = tokenize_for_classification(tokenizer, texts, max_length, HEAD_FRACTION)
    logits = model(ids.to_tensor(default_value=tokenizer.pad_id).numpy(), training=False)
    return np.asarray(keras.ops.softmax(keras.ops.cast(logits, "float32")), np.float64)


@pytest.fixture(scope="module")
def bert_classifier(bert, tmp_path_factory):
    assert type(bert.model).__name__ == "MaskedLM"
    assert type(bert.tokenizer).__name__ == "WordPieceTokenizer"
    keras.utils.set_random_seed(7)
    model = TransformerClassifier.from_encoder(bert.model, NUM_CLASSES, pooling="pooler")
    assert model.num_token_types == 2  # BERT's: `model(ids)` gives them all type 0
    directory = export_serving(
        model,
        bert.tokenizer,
        tmp_path_factory.mktemp("bert-serving") / "serving",
        max_length=MAX_LENGTH,
        head_fraction=HEAD_FRACTION,
    )
    return model, directory


@pytest.fixture(scope="module")
def gpt2_lm(gpt2, tmp_path_factory):
    assert type(gpt2.model).__name__ == "TransformerLM"
    assert type(gpt2.tokenizer).__name__ == "BytePairTokenizer"
    directory = export_serving(
        gpt2.model,
        gpt2.tokenizer,
        tmp_path_factory.mktemp("gpt2-serving") / "serving",
        max_new_tokens=MAX_NEW_TOKENS,
        max_prompt_length=MAX_PROMPT_LENGTH,
    )
    return gpt2.model, directory


@functools.cache
def loaded(directory):
    """The SavedModel at `directory`, loaded once per test process."""
    return tf.saved_model.load(str(directory))


def served_strings(directory, texts, key):
    return loaded(directory).serve(tf.constant(texts, tf.string))[key]


def test_bert_classifier_serves_the_keras_models_probabilities(bert, bert_classifier):
    model, directory = bert_classifier
    probabilities = served_strings(directory, QUERIES, "probabilities").numpy()
    expected = keras_probabilities(model, bert.tokenizer, QUERIES)
    assert probabilities.shape == (len(QUERIES), NUM_CLASSES)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-5)
    assert np.ptp(probabilities[:2], axis=0).max() > 1e-3  # texts are told apart
    one_by_one = [served_strings(directory, [q], "probabilities").numpy()[0] for q in QUERIES]
    np.testing.assert_allclose(one_by_one, probabilities, rtol=0, atol=1e-5)
    # Long texts are cut head + tail, as in training: the middle is dropped.
    long, other_middle = probabilities[-2], probabilities[-1]
    np.testing.assert_allclose(long, other_middle, rtol=0, atol=1e-6)
    uncut = keras_probabilities(model, bert.tokenizer, [LONG], max_length=32)[0]
    assert np.abs(long - uncut).max() > 1e-3
    labels = served_strings(directory, QUERIES, "label").numpy()
    assert labels.tolist() == np.argmax(probabilities, axis=1).tolist()
    assert served_strings(directory, [], "probabilities").shape.as_list() == [0, NUM_CLASSES]


def test_gpt2_classifier_serves_the_keras_models_probabilities(gpt2, tmp_path):
    tokenizer = gpt2.tokenizer
    keras.utils.set_random_seed(3)
    model = tiny_models.classifier(
        tokenizer.vocabulary_size, NUM_CLASSES, pad_id=tokenizer.pad_id, pooling="mean"
    )
    directory = export_serving(
        model, tokenizer, tmp_path / "serving", max_length=MAX_LENGTH, head_fraction=0.25
    )
    probabilities = served_strings(directory, QUERIES, "probabilities").numpy()
    expected = keras_probabilities(model, tokenizer, QUERIES)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-5)
    assert np.ptp(probabilities[:2], axis=0).max() > 1e-3


def greedy_continuations(model, rows, max_new_tokens, end_id):
    """`model.generate`'s greedy continuation of each prompt: its first `max_new_tokens`
    new ids, up to and with the end id (greedy search continues a prompt the same way
    whatever the length budget, so one call serves prompts of every length)."""
    longest = max(map(len, rows))
    prompt = np.full((len(rows), longest), model.pad_id, "int32")
    for number, row in enumerate(rows):
        prompt[number, : len(row)] = row
    generated = model.generate(
        prompt, max_length=longest + max_new_tokens, end_id=end_id, jit_compile=False
    )
    continuations = []
    for row, output in zip(rows, generated.tolist()):
        new = output[len(row) : len(row) + max_new_tokens]
        continuations.append(new[: new.index(end_id) + 1] if end_id in new else new)
    return continuations


def stepwise_greedy(model, ids, max_new_tokens, end_id):
    """Greedy decoding written out with `decode_step`, for a prompt `generate` refuses."""
    cache = model.initial_cache(1, len(ids) + max_new_tokens)
    logits, cache = model.decode_step(np.array([ids], "int32"), cache, 0)
    new = []
    for step in range(max_new_tokens):
        token = int(np.argmax(np.asarray(logits)[0, -1]))
        new.append(token)
        if token == end_id:
            break
        logits, cache = model.decode_step(np.array([[token]], "int32"), cache, len(ids) + step)
    return new


def test_gpt2_lm_serves_generates_greedy_continuations(gpt2, gpt2_lm):
    model, directory = gpt2_lm
    tokenizer = gpt2.tokenizer
    texts = [t.decode("utf-8") for t in served_strings(directory, PROMPTS, "texts").numpy()]
    rows = [tokenizer.encode(prompt)[-MAX_PROMPT_LENGTH:] for prompt in PROMPTS]
    continuations = greedy_continuations(model, rows, MAX_NEW_TOKENS, tokenizer.end_id)
    assert texts == tokenizer.decode(tf.ragged.constant(continuations))
    assert len(set(texts)) > 1 and all(texts)  # not vacuous: continuations differ
    assert len(tokenizer.encode(PROMPTS[1])) > MAX_PROMPT_LENGTH  # the cut is exercised
    one_by_one = [served_strings(directory, [p], "texts").numpy()[0].decode() for p in PROMPTS]
    assert one_by_one == texts
    # An empty prompt starts from <|endoftext|>, GPT-2's start (which `generate` refuses,
    # as it is also the pad id).
    empty = served_strings(directory, [""], "texts").numpy()[0].decode("utf-8")
    new = stepwise_greedy(model, [tokenizer.start_id], MAX_NEW_TOKENS, tokenizer.end_id)
    assert empty == tokenizer.decode(new)
    assert served_strings(directory, [], "texts").shape.as_list() == [0]


def test_subword_lm_serves_generates_greedy_continuations(tokenizer, tmp_path):
    keras.utils.set_random_seed(5)
    model = tiny_models.lm(tokenizer.vocabulary_size)
    directory = export_serving(model, tokenizer, tmp_path / "serving", max_new_tokens=6)
    prompts = ["A man rides", "Zwei Hunde spielen im", ""]
    texts = served_strings(directory, prompts, "texts").numpy().tolist()
    rows = [row or [tokenizer.start_id] for row in tokenizer.tokenize(prompts).to_list()]
    continuations = greedy_continuations(model, rows, 6, tokenizer.end_id)
    assert texts == tokenizer.detokenize(tf.ragged.constant(continuations)).numpy().tolist()
    assert len(set(texts)) > 1


FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf

    lm = tf.saved_model.load(sys.argv[1])  # GPT-2's BPE: TensorFlow's own ops
    texts = lm.signatures["serving_default"](sentences=tf.constant(json.loads(sys.argv[3])))
    import tensorflow_text  # noqa: F401  (WordPiece: FastWordpieceTokenizer, NFD)

    classifier = tf.saved_model.load(sys.argv[2])
    probabilities = classifier.serve(tf.constant(json.loads(sys.argv[4])))["probabilities"]
    print(json.dumps({
        "texts": [t.decode("utf-8") for t in texts["texts"].numpy()],
        "probabilities": probabilities.numpy().tolist(),
        "imported": sorted(m for m in sys.modules if m.startswith("keras_transformer")),
    }))
    """
)


def test_exports_stand_alone_in_a_fresh_python(gpt2_lm, bert_classifier):
    lm_directory, classifier_directory = gpt2_lm[1], bert_classifier[1]
    result = run_python(
        "-c",
        FRESH_PROCESS,
        lm_directory,
        classifier_directory,
        json.dumps(PROMPTS),
        json.dumps(QUERIES),
        env=None,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["imported"] == []
    expected_texts = served_strings(lm_directory, PROMPTS, "texts").numpy()
    assert answer["texts"] == [t.decode("utf-8") for t in expected_texts]
    expected = served_strings(classifier_directory, QUERIES, "probabilities").numpy()
    np.testing.assert_allclose(answer["probabilities"], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "model, tokenizer, arguments, match",
    [
        ("lm", "bert", {}, r"`tokenizer` must be a `SubwordTokenizer` or a `BytePairTokenizer`"),
        ("lm", "gpt2", {"max_length": 64}, r"`max_length` does not apply to a TransformerLM"),
        ("lm", "gpt2", {"beam_size": 2}, r"Its arguments are `max_new_tokens`, `max_prompt"),
        ("classifier", "bert", {"max_new_tokens": 4}, "`max_new_tokens` does not apply"),
        ("translation", "bert", {}, r"`SubwordTokenizer` or a `MarianTokenizer` for a Seq2Seq"),
        ("lm", "gpt2", {"max_new_tokens": 0}, "`max_new_tokens` must be a positive integer"),
        ("lm", "gpt2", {"max_new_tokens": 33}, r"leaves no room.*max_new_tokens<=32"),
        ("lm", "gpt2", {"max_new_tokens": 8, "max_prompt_length": 30}, r"max_prompt_length<=25"),
        ("small_lm", "gpt2", {}, r"The tokenizer has \d+ ids but the model predicts 50"),
        ("classifier", "bert", {"max_length": 64}, r"`max_length` \(64\) exceeds"),
    ],
)
def test_bad_arguments(bert, gpt2, tmp_path, model, tokenizer, arguments, match):
    models = {
        "lm": lambda: gpt2.model,
        "small_lm": lambda: tiny_models.lm(50),
        "classifier": lambda: TransformerClassifier.from_encoder(bert.model, NUM_CLASSES),
        "translation": lambda: tiny_models.seq2seq(bert.tokenizer.vocabulary_size),
    }
    tokenizers_ = {"bert": bert.tokenizer, "gpt2": gpt2.tokenizer}
    with pytest.raises(ValueError, match=match):
        export_serving(models[model](), tokenizers_[tokenizer], tmp_path / "s", **arguments)
    assert not (tmp_path / "s").exists()
