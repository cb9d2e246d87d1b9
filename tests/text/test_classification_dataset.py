import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.text import fixed_shape_lengths
from keras_transformer.text.classification_dataset import (
    classification_batch_shapes,
    head_and_tail_sizes,
    make_classification_dataset,
    tokenize_for_classification,
)
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from tests import tiny_models
from tests.text.padding_scores import assert_scored_as_without_padding
from tests.text.random_texts import random_texts

PAD, START, END = 0, 2, 3
NUMBERS = "one two three four five six seven eight nine ten eleven twelve".split()
WORDS = NUMBERS + "good bad film plot acting great awful movie boring moving".split()
TWELVE = " ".join(NUMBERS)


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer.train(random_texts(WORDS, 500, 3, 15), vocabulary_size=400)


@pytest.fixture(scope="module")
def texts():
    """200 texts of 1 to 30 words: each fits in `max_length=64` uncut."""
    return random_texts(WORDS, 200, 1, 30, seed=1)


def _epoch(dataset):
    return [(ids.numpy(), labels.numpy()) for ids, labels in dataset]


def _labels_in_order(batches):
    return np.concatenate([labels for _, labels in batches]).tolist()


def _padding_fraction(batches):
    cells = sum(ids.size for ids, _ in batches)
    return 1 - sum(int(np.count_nonzero(ids)) for ids, _ in batches) / cells


def test_twelve_words_are_twelve_pieces(tokenizer):
    # The truncation tests below read kept words off the decoded text.
    pieces = tokenizer.id_to_piece(tokenizer.tokenize(TWELVE)).numpy()
    assert [piece.decode("utf-8") for piece in pieces] == ["▁" + word for word in NUMBERS]


def test_layout_is_start_pieces_end(tokenizer):
    batch = ["good film", "", "one two three boring plot", "Ünïcode 😀!"]
    ids = tokenize_for_classification(tokenizer, batch)
    assert isinstance(ids, tf.RaggedTensor)
    assert ids.dtype == tf.int32 and ids.shape.as_list() == [4, None]
    pieces = tokenizer.tokenize(batch).to_list()
    assert ids.to_list() == [[START, *row, END] for row in pieces]
    assert [len(row) for row in pieces] == [2, 0, 5, len(pieces[3])] and len(pieces[3]) > 5
    assert tokenizer.decode(ids) == batch


@pytest.mark.parametrize(
    "max_length, head_fraction, kept",
    [
        (7, 0.4, "one two ten eleven twelve"),  # head 2, tail 3
        (7, 0.25, "one nine ten eleven twelve"),  # round(1.25) = 1
        (7, 1.0, "one two three four five"),
        (7, 0.0, "eight nine ten eleven twelve"),
        (12, 0.5, "one two three four five eight nine ten eleven twelve"),
        (13, 0.5, "one two three four five six eight nine ten eleven twelve"),  # round(5.5) = 6
        (14, 0.25, TWELVE),  # exactly fits: nothing cut
        (3, 0.25, "twelve"),  # round(0.25) = 0: the one piece comes from the end
        (3, 0.5, "twelve"),  # round(0.5) = 0 (to even)
        (3, 0.75, "one"),
    ],
)
def test_head_and_tail_truncation_keeps_known_pieces(tokenizer, max_length, head_fraction, kept):
    ids = tokenize_for_classification(tokenizer, [TWELVE], max_length, head_fraction)
    row = ids.to_list()[0]
    assert len(row) == min(max_length, 14)
    assert row[0] == START and row[-1] == END
    assert tokenizer.decode(ids) == [kept]
    head, tail = head_and_tail_sizes(max_length, head_fraction)
    pieces = tokenizer.tokenize(TWELVE).numpy().tolist()
    if len(pieces) > head + tail:
        assert row[1:-1] == pieces[:head] + pieces[len(pieces) - tail :]


def test_truncation_is_per_row(tokenizer):
    batch = [TWELVE, "", "good", "one two three four five six"]
    ids = tokenize_for_classification(tokenizer, batch, max_length=8, head_fraction=0.5)
    assert tokenizer.decode(ids) == [
        "one two three ten eleven twelve",
        "",
        "good",
        "one two three four five six",
    ]
    assert [len(row) for row in ids.to_list()] == [8, 2, 3, 8]


def test_head_and_tail_sizes():
    assert head_and_tail_sizes(256) == (64, 190)
    assert head_and_tail_sizes(512, 0.25) == (128, 382)
    assert head_and_tail_sizes(12, 0.25) == (2, 8)  # round(2.5) = 2
    assert head_and_tail_sizes(3, 1) == (1, 0)


def test_same_ids_eagerly_in_dataset_map_and_in_tf_function(tokenizer, texts):
    batch = [TWELVE, *texts[:20], ""]
    expected = tokenize_for_classification(tokenizer, batch, 9, 0.4).to_list()
    assert max(len(row) for row in expected) == 9 and min(len(row) for row in expected) == 2
    as_numpy = tokenize_for_classification(tokenizer, np.array(batch), 9, 0.4)
    assert as_numpy.to_list() == expected
    mapped = (
        tf.data.Dataset.from_tensor_slices(batch)
        .batch(8)
        .map(lambda t: tokenize_for_classification(tokenizer, t, 9, 0.4))
    )
    assert [row for ids in mapped for row in ids.to_list()] == expected

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def traced(sentences):
        return tokenize_for_classification(tokenizer, sentences, 9, 0.4)

    assert traced(tf.constant(batch)).to_list() == expected
    empty = traced(tf.constant([], tf.string))
    assert empty.shape.as_list() == [0, None] and empty.to_list() == []


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_length": 2}, r"`max_length` must be None or an int >= 3.*max_length=2"),
        ({"max_length": 8.0}, r"`max_length` must be .*max_length=8\.0"),
        ({"max_length": True}, r"`max_length` must be .*max_length=True"),
        ({"head_fraction": 1.5}, r"`head_fraction` must be a float in \[0, 1\].*=1\.5"),
        ({"head_fraction": -0.1}, r"`head_fraction` must be .*=-0\.1"),
        ({"texts": "one text"}, r"`texts` must be a 1-D batch of strings.*\(\)"),
        ({"texts": [["a", "b"]]}, r"`texts` must be a 1-D batch.*\(1, 2\)"),
    ],
)
def test_tokenize_bad_arguments(tokenizer, kwargs, match):
    arguments = {"texts": ["good"], "max_length": 8, **kwargs}
    with pytest.raises(ValueError, match=match):
        tokenize_for_classification(tokenizer, **arguments)


def test_every_example_once_per_epoch_with_its_label(tokenizer, texts):
    labels = list(range(len(texts)))  # a label per example, to find it again
    dataset = make_classification_dataset(texts, labels, tokenizer, batch_size=16, max_length=64)
    token_spec, label_spec = dataset.element_spec
    assert token_spec.dtype == tf.int32 and token_spec.shape.as_list() == [None, None]
    assert label_spec.dtype == tf.int32 and label_spec.shape.as_list() == [None]
    for _ in range(2):
        batches = _epoch(dataset)
        assert sorted(_labels_in_order(batches)) == labels
        for ids, batch_labels in batches:
            assert ids.dtype == np.int32 and batch_labels.dtype == np.int32
            assert tokenizer.decode(ids) == [texts[label] for label in batch_labels]


def test_padding_only_at_row_ends_and_batch_sizes(tokenizer, texts):
    labels = [i % 3 for i in range(len(texts))]
    dataset = make_classification_dataset(texts, labels, tokenizer, batch_size=16, max_length=64)
    batches = _epoch(dataset)
    sizes = [len(batch_labels) for _, batch_labels in batches]
    assert sum(sizes) == len(texts) and max(sizes) == 16
    for ids, _ in batches:
        lengths = np.count_nonzero(ids, axis=1)
        assert lengths.max() == ids.shape[1]  # no column of padding only
        for row, length in zip(ids, lengths):
            assert row[0] == START and row[length - 1] == END
            assert np.all(row[:length] != PAD) and np.all(row[length:] == PAD)


def test_buckets_cut_padding(tokenizer, texts):
    labels = [0] * len(texts)
    fractions = {
        bucket: _padding_fraction(
            _epoch(
                make_classification_dataset(
                    texts, labels, tokenizer, batch_size=8, max_length=64, seed=0, bucket=bucket
                )
            )
        )
        for bucket in (True, False)
    }
    # Measured: 0.04 with buckets, 0.41 without (texts of 1 to 30 words, batches of 8).
    assert fractions[True] < 0.1 and fractions[False] > 0.3


def test_long_texts_are_cut_as_tokenize_for_classification_cuts_them(tokenizer):
    long_texts = random_texts(WORDS, 40, 20, 60, seed=2)
    dataset = make_classification_dataset(
        long_texts, list(range(40)), tokenizer, max_length=16, head_fraction=0.5, seed=0
    )
    expected = tokenize_for_classification(tokenizer, long_texts, 16, 0.5).to_list()
    rows = {}
    for ids, batch_labels in _epoch(dataset):
        for row, label in zip(ids, batch_labels):
            rows[int(label)] = row[row != PAD].tolist()
    assert [rows[i] for i in range(40)] == expected
    assert all(len(row) == 16 for row in expected)


def test_reshuffles_each_epoch_and_repeats_with_a_seed(tokenizer, texts):
    labels = list(range(len(texts)))

    def epochs(seed, count=2):
        dataset = make_classification_dataset(
            texts, labels, tokenizer, batch_size=16, max_length=64, seed=seed
        )
        return [_labels_in_order(_epoch(dataset)) for _ in range(count)]

    first, second = epochs(seed=3)
    assert first != second and sorted(first) == sorted(second) == labels
    assert epochs(seed=3) == [first, second]
    assert epochs(seed=4)[0] != first


def test_no_shuffle_is_deterministic(tokenizer, texts):
    labels = list(range(len(texts)))
    dataset = make_classification_dataset(
        texts, labels, tokenizer, batch_size=16, max_length=64, shuffle=False
    )
    once = _epoch(dataset)
    again = make_classification_dataset(
        texts, labels, tokenizer, batch_size=16, max_length=64, shuffle=False
    )
    for other in (_epoch(dataset), _epoch(again)):
        assert len(other) == len(once)
        for (ids, batch_labels), (other_ids, other_labels) in zip(once, other):
            np.testing.assert_array_equal(other_ids, ids)
            np.testing.assert_array_equal(other_labels, batch_labels)
    unbucketed = make_classification_dataset(
        texts, labels, tokenizer, batch_size=16, max_length=64, shuffle=False, bucket=False
    )
    assert _labels_in_order(_epoch(unbucketed)) == labels  # the input order


class CountingTokenizer:
    """Counts the texts tokenized, at run time, inside the tf.data graph."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.pad_id, self.start_id, self.end_id = PAD, START, END
        self.count = tf.Variable(0, dtype=tf.int64)

    def tokenize(self, texts):
        self.count.assign_add(tf.size(texts, out_type=tf.int64))
        return self.tokenizer.tokenize(texts)


def test_texts_are_tokenized_once(tokenizer, texts):
    counting = CountingTokenizer(tokenizer)
    dataset = make_classification_dataset(texts, [0] * len(texts), counting, batch_size=16)
    for _ in range(3):
        assert len(_labels_in_order(_epoch(dataset))) == len(texts)
    assert int(counting.count.numpy()) == len(texts)


def test_numpy_inputs(tokenizer, texts):
    labels = np.arange(len(texts)) % 2
    dataset = make_classification_dataset(
        np.array(texts), labels, tokenizer, max_length=64, num_classes=2, shuffle=False
    )
    batches = _epoch(dataset)
    assert sorted(_labels_in_order(batches)) == sorted(labels.tolist())
    assert dataset.options().autotune.enabled is False


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"labels": [0, 1, 2, 1]}, r"labels\[2\]=2 with num_classes=2"),
        ({"labels": np.array([1, 0, 0, 5])}, r"labels\[3\]=5 with num_classes=2"),
        ({"labels": [0, -1, 0, 0], "num_classes": None}, r"labels\[1\]=-1 with num_classes=None"),
        ({"labels": [0, 1.5, 0, 1]}, r"integer class ids.*labels\[1\]=1\.5 \(float\)"),
        ({"labels": [0, 1, True, 1]}, r"integer class ids.*labels\[2\]=True"),
        ({"labels": ["neg", "pos", "neg", "pos"]}, r"integer class ids.*labels\[0\]='neg'"),
        ({"labels": np.zeros((4, 1), int)}, r"`labels` must be 1-D.*\(4, 1\)"),
        ({"labels": [0, 1, 0]}, "one label per text: got 3 labels for 4 texts"),
        ({"num_classes": 0}, r"`num_classes` must be a positive integer.*num_classes=0"),
        ({"texts": [], "labels": []}, "`texts` is empty"),
        ({"texts": "good film"}, "not a single string"),
        ({"texts": ["a", 7, "b", "c"]}, r"texts\[1\] of type int"),
        ({"batch_size": 0}, r"`batch_size` must be a positive integer.*batch_size=0"),
        ({"max_length": 2}, r"`max_length` must be an int >= 3.*max_length=2"),
        ({"head_fraction": 2}, r"`head_fraction` must be a float in \[0, 1\]"),
        ({"seed": "7"}, r"`seed` must be None or an int"),
    ],
)
def test_dataset_bad_arguments(tokenizer, kwargs, match):
    arguments = {
        "texts": ["good film", "bad plot", "boring", "great acting"],
        "labels": [1, 0, 0, 1],
        "tokenizer": tokenizer,
        "num_classes": 2,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        make_classification_dataset(**arguments)


def test_batch_size_multiple_completes_batches_with_weightless_copies(tokenizer, texts):
    labels = list(range(len(texts)))  # a label per example, to find it again
    plain = _epoch(
        make_classification_dataset(texts, labels, tokenizer, batch_size=16, max_length=64)
    )
    dataset = make_classification_dataset(
        texts, labels, tokenizer, batch_size=16, max_length=64, batch_size_multiple=8
    )
    assert dataset.element_spec[2].dtype == tf.float32
    assert any(len(batch_labels) % 8 for _, batch_labels in plain)  # the case is exercised
    real, copies = [], 0
    for ids, batch_labels, weights in dataset:
        ids, batch_labels, weights = ids.numpy(), batch_labels.numpy(), weights.numpy()
        assert len(batch_labels) % 8 == 0 and len(ids) == len(weights) == len(batch_labels)
        assert set(np.unique(weights)) <= {0.0, 1.0}
        kept = int(weights.sum())
        assert np.all(weights[:kept] == 1)  # the real rows first, then the copies
        assert tokenizer.decode(ids) == [texts[label] for label in batch_labels]
        real += batch_labels[:kept].tolist()
        copies += len(batch_labels) - kept
        # Each copy repeats one of its batch's real rows.
        assert set(batch_labels[kept:]) <= set(batch_labels[:kept])
    assert sorted(real) == labels and 0 < copies
    assert copies == sum(-len(batch_labels) % 8 for _, batch_labels in plain)


def test_batch_size_multiple_must_divide_the_batch_size(tokenizer, texts):
    with pytest.raises(ValueError, match=r"`batch_size` \(16\) must be a multiple of .*\(3\)"):
        make_classification_dataset(
            texts, [0] * len(texts), tokenizer, batch_size=16, batch_size_multiple=3
        )
    with pytest.raises(ValueError, match=r"`batch_size_multiple` must be a positive integer"):
        make_classification_dataset(texts, [0] * len(texts), tokenizer, batch_size_multiple=0)


@pytest.mark.parametrize("bucket", [True, False])
def test_fixed_shapes_are_the_documented_ones_with_every_text_once(tokenizer, texts, bucket):
    labels = list(range(len(texts)))
    dataset = make_classification_dataset(
        texts, labels, tokenizer, batch_size=16, max_length=64, fixed_shapes=True, bucket=bucket
    )
    plain = _epoch(
        make_classification_dataset(texts, labels, tokenizer, batch_size=16, max_length=64)
    )
    lengths = fixed_shape_lengths(64, min_length=8) if bucket else [64]
    if bucket:
        assert classification_batch_shapes(16, 64) == [(16, length) for length in lengths]
    shapes, real, copies = set(), [], 0
    for ids, batch_labels, weights in dataset:
        ids, batch_labels, weights = ids.numpy(), batch_labels.numpy(), weights.numpy()
        shapes.add(ids.shape)
        kept = int(weights.sum())
        assert np.all(weights[:kept] == 1) and np.all(weights[kept:] == 0)
        assert tokenizer.decode(ids) == [texts[label] for label in batch_labels]
        real += batch_labels[:kept].tolist()
        copies += len(batch_labels) - kept
    # The docs' count: (batch_size, length) for the 7 lengths of max_length=64, at most.
    assert shapes <= {(16, length) for length in lengths} and len(lengths) == (7 if bucket else 1)
    assert len(shapes) >= min(3, len(lengths))
    assert len({ids.shape for ids, _ in plain}) > 2 * len(lengths)
    assert sorted(real) == labels and copies > 0


def test_weightless_copies_leave_loss_and_accuracy_unchanged(tokenizer, texts):
    """A batch completed to its fixed shape scores as its real rows, unpadded."""
    labels = [i % 2 for i in range(len(texts))]
    dataset = make_classification_dataset(
        texts, labels, tokenizer, batch_size=16, max_length=64, fixed_shapes=True, shuffle=False
    )
    model = tiny_models.classifier(tokenizer.vocabulary_size, 2, dropout=0.0)
    # The classification example's compile: a mean over the weights, a weighted accuracy.
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        ),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )

    def padded_and_plain():
        for ids, batch_labels, weights in dataset:
            ids, batch_labels, weights = ids.numpy(), batch_labels.numpy(), weights.numpy()
            real = weights > 0
            if real.all():
                continue
            width = int((ids[real] != PAD).sum(1).max())
            yield (ids, batch_labels, weights), (ids[real, :width], batch_labels[real], None)

    assert_scored_as_without_padding(model, padded_and_plain())
