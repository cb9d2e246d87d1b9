"""`mask_tokens` (BERT's 80/10/10 masking) and the tokenizer's `<mask>` id.

Statistical checks state their tolerance in binomial standard deviations: with 5 of them a
correct implementation fails one bin in about two million, while the mistakes they guard
against (a wrong share, a skipped id, a biased choice) move a count by tens of them.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.text.masking import mask_tokens
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from tests.text.random_texts import random_texts

PAD, UNK, START, END, MASK = 0, 1, 2, 3, 4
VOCAB = 60
SPECIALS = (PAD, START, END)
# The ids a random replacement may take under the defaults: all but pad, start, end and mask.
REGULAR = np.array([UNK, *range(MASK + 1, VOCAB)])
ROWS = 2000
SEED = (7, 11)
SIGMAS = 5


def _binomial_tolerance(p, n):
    """`SIGMAS` standard deviations of a share of `n` draws of probability `p`."""
    return SIGMAS * np.sqrt(p * (1 - p) / n)


def _expected_counts(num_maskable, rate=0.15):
    """BERT's rule: `round(rate * n)`, at least one when there is anything to mask."""
    return np.array([max(round(rate * n), min(n, 1)) for n in num_maskable])


@pytest.fixture(scope="module")
def batch():
    """2,000 rows `[start, tokens..., end, pad...]` of 0 to 100 tokens.

    The tokens are regular ids, with about one in 30 a literal `mask_id`, which must
    never be chosen either. Returns `(ids, maskable)`.
    """
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 101, ROWS)
    lengths[:20] = 0  # rows with nothing to mask
    width = lengths.max() + 2 + 3  # start, end and always some padding
    ids = np.full((ROWS, width), PAD, np.int32)
    pool = np.concatenate([REGULAR, [MASK, MASK]])
    for row, length in enumerate(lengths):
        ids[row, : length + 2] = [START, *rng.choice(pool, length), END]
    maskable = ~np.isin(ids, SPECIALS + (MASK,))
    return ids, maskable


def _numpy(inputs, labels):
    return inputs["token_ids"].numpy(), inputs["mask_positions"].numpy(), labels.numpy()


@pytest.fixture(scope="module")
def masked(batch):
    ids, _ = batch
    return _numpy(*mask_tokens(ids, MASK, VOCAB, seed=SEED))


def _chosen_mask(positions, counts, shape):
    """Boolean `(batch, length)`: `True` at the first `counts[row]` positions of each row."""
    chosen = np.zeros(shape, bool)
    for row, count in enumerate(counts):
        chosen[row, positions[row, :count]] = True
    return chosen


def test_each_row_gets_round_15_percent_of_its_maskable_tokens(batch, masked):
    ids, maskable = batch
    _, positions, labels = masked
    num_maskable = maskable.sum(axis=1)
    # A chosen token is never padding, so its label is never `pad_id`.
    counts = (labels != PAD).sum(axis=1)
    np.testing.assert_array_equal(counts, _expected_counts(num_maskable))
    assert counts[num_maskable == 0].max() == 0
    assert positions.shape == labels.shape == (ROWS, counts.max())
    # Rounding moves each row's count by at most half a token; over 2,000 rows of ~50
    # tokens the share lands within 0.002 of 15% (measured 0.1505).
    assert abs(counts.sum() / num_maskable.sum() - 0.15) < 0.002


def test_positions_ascend_over_maskable_tokens_and_unused_slots_trail(batch, masked):
    ids, maskable = batch
    _, positions, labels = masked
    counts = _expected_counts(maskable.sum(axis=1))
    slots = np.arange(positions.shape[1])[None, :]
    used = slots < counts[:, None]
    # Unused slots: position 0, label `pad_id`, and only after the used ones.
    assert np.all(positions[~used] == 0) and np.all(labels[~used] == PAD)
    # Used slots: strictly ascending positions of maskable tokens, labelled with the
    # original token.
    ascending = np.diff(positions, axis=1) > 0
    assert np.all(ascending[used[:, 1:]])
    rows = np.broadcast_to(np.arange(ROWS)[:, None], positions.shape)
    assert np.all(maskable[rows[used], positions[used]])
    np.testing.assert_array_equal(labels[used], ids[rows[used], positions[used]])


def test_only_chosen_tokens_change(batch, masked):
    ids, maskable = batch
    token_ids, positions, labels = masked
    assert token_ids.dtype == positions.dtype == labels.dtype == np.int32
    chosen = _chosen_mask(positions, (labels != PAD).sum(axis=1), ids.shape)
    np.testing.assert_array_equal(token_ids[~chosen], ids[~chosen])
    # In particular padding, start, end and literal mask ids are all left as they were.
    assert not np.any(chosen & ~maskable)
    assert np.all(np.isin(ids[~maskable], SPECIALS + (MASK,)))


def test_chosen_tokens_split_80_10_10(batch, masked):
    ids, _ = batch
    token_ids, positions, labels = masked
    chosen = _chosen_mask(positions, (labels != PAD).sum(axis=1), ids.shape)
    original, replaced = ids[chosen], token_ids[chosen]
    n = original.size  # about 15,000
    to_mask = replaced == MASK
    kept = replaced == original
    randomised = ~to_mask & ~kept
    # A random id equals the original one time in len(REGULAR): it then counts as kept.
    p_hit = 1 / len(REGULAR)
    for share, p in [
        (to_mask.mean(), 0.8),
        (kept.mean(), 0.1 + 0.1 * p_hit),
        (randomised.mean(), 0.1 * (1 - p_hit)),
    ]:
        assert abs(share - p) < _binomial_tolerance(p, n), (share, p, n)
    # Random ids are regular ids, never padding, start, end or the mask id.
    assert np.all(np.isin(replaced[randomised], REGULAR))


@pytest.mark.parametrize(
    "mask_id, special_ids",
    [(MASK, SPECIALS), (7, (0, 2, 3, 7, 30, VOCAB - 1))],
    ids=["defaults", "scattered_specials"],
)
def test_random_replacements_are_uniform_over_regular_ids(batch, mask_id, special_ids):
    ids, _ = batch
    # Every maskable token chosen and replaced by a random id: ~100,000 draws.
    inputs, _ = mask_tokens(
        ids,
        mask_id,
        VOCAB,
        mask_rate=1.0,
        special_ids=special_ids,
        mask_token_rate=0.0,
        random_token_rate=1.0,
        seed=SEED,
    )
    maskable = ~np.isin(ids, special_ids + (mask_id,))
    counts = np.bincount(inputs["token_ids"].numpy()[maskable], minlength=VOCAB)
    excluded = sorted(set(special_ids) | {mask_id})
    regular = np.setdiff1d(np.arange(VOCAB), excluded)
    assert np.all(counts[excluded] == 0), counts[excluded]
    n = maskable.sum()
    p = 1 / len(regular)
    expected, tolerance = n * p, n * _binomial_tolerance(p, n)
    assert np.all(np.abs(counts[regular] - expected) < tolerance), (counts[regular], expected)


def test_choice_is_uniform_over_the_positions_of_a_row():
    # 4,000 copies of one row of 20 tokens: 3 chosen per row, so each position is chosen
    # with probability 0.15 whatever its place or token.
    rows = 4000
    ids = np.tile([START, *range(10, 30), END, PAD], (rows, 1)).astype(np.int32)
    inputs, labels = mask_tokens(ids, MASK, VOCAB, seed=SEED)
    positions = inputs["mask_positions"].numpy()
    assert positions.shape == (rows, 3) and np.all(labels.numpy() != PAD)
    counts = np.bincount(positions.ravel(), minlength=ids.shape[1])
    assert counts[0] == counts[21] == counts[22] == 0
    tolerance = rows * _binomial_tolerance(0.15, rows)
    assert np.all(np.abs(counts[1:21] - 0.15 * rows) < tolerance), counts[1:21]


def test_max_predictions_caps_the_slots(batch, masked):
    ids, maskable = batch
    token_ids, positions, labels = _numpy(*mask_tokens(ids, MASK, VOCAB, max_predictions=5))
    expected = np.minimum(_expected_counts(maskable.sum(axis=1)), 5)
    assert positions.shape == labels.shape == (ROWS, 5)
    np.testing.assert_array_equal((labels != PAD).sum(axis=1), expected)
    chosen = _chosen_mask(positions, expected, ids.shape)
    np.testing.assert_array_equal(token_ids[~chosen], ids[~chosen])
    # A cap above every row's count changes nothing.
    uncapped = _numpy(*mask_tokens(ids, MASK, VOCAB, max_predictions=1000, seed=SEED))
    for capped, reference in zip(uncapped, masked):
        np.testing.assert_array_equal(capped, reference)


def test_rows_without_maskable_tokens_give_no_slots():
    ids = np.array([[START, END, PAD], [START, MASK, END]], np.int32)
    token_ids, positions, labels = _numpy(*mask_tokens(ids, MASK, VOCAB, seed=SEED))
    np.testing.assert_array_equal(token_ids, ids)
    assert positions.shape == labels.shape == (2, 0)
    empty = _numpy(*mask_tokens(np.zeros((0, 4), np.int32), MASK, VOCAB, seed=SEED))
    assert [a.shape for a in empty] == [(0, 4), (0, 0), (0, 0)]


def test_the_same_seed_repeats_and_another_differs(batch, masked):
    ids, _ = batch
    again = _numpy(*mask_tokens(tf.constant(ids, tf.int64), MASK, VOCAB, seed=tf.constant(SEED)))
    for repeated, reference in zip(again, masked):
        np.testing.assert_array_equal(repeated, reference)
    other = _numpy(*mask_tokens(ids, MASK, VOCAB, seed=(7, 12)))
    assert not np.array_equal(other[1], masked[1])
    assert not np.array_equal(other[0], masked[0])
    # Without a seed every call draws afresh.
    first, second = (mask_tokens(ids, MASK, VOCAB)[0]["mask_positions"] for _ in range(2))
    assert not np.array_equal(first, second)


def test_ragged_input_is_padded_with_pad_id(batch):
    ids, maskable = batch
    ragged = tf.RaggedTensor.from_tensor(tf.constant(ids, tf.int64), padding=PAD)
    dense = ragged.to_tensor(default_value=PAD)
    # The longest row sets the width, here 3 narrower than the padded batch.
    assert dense.shape == (ROWS, ids.shape[1] - 3)
    from_ragged = _numpy(*mask_tokens(ragged, MASK, VOCAB, seed=SEED))
    from_dense = _numpy(*mask_tokens(dense, MASK, VOCAB, seed=SEED))
    for result, reference in zip(from_ragged, from_dense):
        np.testing.assert_array_equal(result, reference)
    labels = from_ragged[2]
    np.testing.assert_array_equal((labels != PAD).sum(axis=1), _expected_counts(maskable.sum(1)))


def test_a_pad_id_outside_special_ids_is_never_chosen():
    """Ragged rows are padded with `pad_id`: that padding must stay padding."""
    pad = 9
    ragged = tf.ragged.constant([[START, 11, 12, 13, END], [START, 5, END]])
    token_ids, positions, labels = _numpy(
        *mask_tokens(ragged, MASK, VOCAB, mask_rate=1.0, special_ids=(2, 3), pad_id=pad, seed=SEED)
    )
    np.testing.assert_array_equal(token_ids[1, 3:], [pad, pad])
    np.testing.assert_array_equal(positions, [[1, 2, 3], [1, 0, 0]])
    np.testing.assert_array_equal(labels, [[11, 12, 13], [5, pad, pad]])


def test_runs_in_tf_data_with_a_seed_per_batch(batch):
    ids, _ = batch
    rows = tf.RaggedTensor.from_tensor(ids[:20], padding=PAD)
    seeds = tf.data.Dataset.random(seed=3).batch(2)
    dataset = tf.data.Dataset.zip(tf.data.Dataset.from_tensor_slices(rows).ragged_batch(2), seeds)
    dataset = dataset.map(
        lambda token_ids, seed: (mask_tokens(token_ids, MASK, VOCAB, seed=seed), seed)
    )
    all_positions = []
    for ((inputs, labels), seed), expected_ids in zip(dataset, np.split(ids[:20], 10)):
        ragged = tf.RaggedTensor.from_tensor(expected_ids, padding=PAD)
        eager = _numpy(*mask_tokens(ragged, MASK, VOCAB, seed=seed))
        for result, reference in zip(_numpy(inputs, labels), eager):
            np.testing.assert_array_equal(result, reference)
        all_positions.append(eager[1])
    assert len(all_positions) == 10
    # A fresh seed per batch: two passes over the dataset mask alike.
    second = [inputs["mask_positions"].numpy() for (inputs, _), _ in dataset]
    for again, first in zip(second, all_positions):
        np.testing.assert_array_equal(again, first)


def test_unseeded_inside_tf_data_map():
    rows = np.tile([START, *range(10, 30), END], (8, 1)).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices(rows).batch(4)
    dataset = dataset.map(lambda token_ids: mask_tokens(token_ids, MASK, VOCAB))
    positions = np.concatenate([inputs["mask_positions"].numpy() for inputs, _ in dataset])
    assert positions.shape == (8, 3)
    assert len({tuple(row) for row in positions}) > 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mask_id": -1}, "`mask_id` must be a non-negative int. Received: mask_id=-1."),
        ({"mask_id": 4.0}, "`mask_id` must be a non-negative int. Received: mask_id=4.0."),
        ({"mask_id": True}, "`mask_id` must be a non-negative int. Received: mask_id=True."),
        (
            {"vocabulary_size": "60"},
            "`vocabulary_size` must be a non-negative int. Received: vocabulary_size='60'.",
        ),
        (
            {"vocabulary_size": 4},
            "`mask_id` (4) must be below `vocabulary_size` (4). Use a tokenizer trained with "
            "`mask_token=True` and its `mask_id`.",
        ),
        ({"mask_rate": 1.5}, "`mask_rate` must be a float in [0, 1]. Received: mask_rate=1.5."),
        ({"mask_rate": -0.1}, "`mask_rate` must be a float in [0, 1]. Received: mask_rate=-0.1."),
        (
            {"mask_rate": "0.15"},
            "`mask_rate` must be a float in [0, 1]. Received: mask_rate='0.15'.",
        ),
        ({"mask_rate": True}, "`mask_rate` must be a float in [0, 1]. Received: mask_rate=True."),
        ({"mask_rate": 0}, "`mask_rate` must be above 0, e.g. 0.15 (BERT's)."),
        (
            {"mask_token_rate": 1.1},
            "`mask_token_rate` must be a float in [0, 1]. Received: mask_token_rate=1.1.",
        ),
        (
            {"random_token_rate": -0.5},
            "`random_token_rate` must be a float in [0, 1]. Received: random_token_rate=-0.5.",
        ),
        (
            {"mask_token_rate": 0.9, "random_token_rate": 0.2},
            "`mask_token_rate + random_token_rate` must be at most 1 (the rest keeps the "
            "token). Received: 0.9 + 0.2.",
        ),
        (
            {"special_ids": (0, 2, 300)},
            "`special_ids` must lie in [0, vocabulary_size=60). Received: special_ids=(0, 2, 300).",
        ),
        (
            {"special_ids": (0, 2.0)},
            "`special_ids` must hold int ids. Received: special_ids=(0, 2.0).",
        ),
        (
            {"max_predictions": 0},
            "`max_predictions` must be a positive int or None. Received: max_predictions=0.",
        ),
        (
            {"max_predictions": 2.0},
            "`max_predictions` must be a positive int or None. Received: max_predictions=2.0.",
        ),
        (
            {"max_predictions": True},
            "`max_predictions` must be a positive int or None. Received: max_predictions=True.",
        ),
        (
            {"vocabulary_size": 5, "special_ids": (0, 1, 2, 3)},
            "`special_ids` and `mask_id` ([0, 1, 2, 3, 4]) leave no regular id in a "
            "vocabulary of 5.",
        ),
        (
            {"token_ids": [START, 11, END]},
            "`token_ids` must have shape `(batch, length)`. Received: shape=(3,).",
        ),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    arguments = {"token_ids": [[START, 11, 12, END]], "mask_id": MASK, "vocabulary_size": VOCAB}
    arguments.update(kwargs)
    with pytest.raises(ValueError) as info:
        mask_tokens(**arguments)
    assert str(info.value) == message


# The tokenizer's `<mask>` id.

WORDS = "one two three four five six seven eight nine ten good bad film plot".split()


@pytest.fixture(scope="module")
def texts():
    return random_texts(WORDS, 300, 3, 14)


@pytest.fixture(scope="module")
def mask_tokenizer(texts):
    return SubwordTokenizer.train(texts, vocabulary_size=300, mask_token=True)


def test_mask_token_reserves_id_4(mask_tokenizer, texts):
    assert mask_tokenizer.mask_id == MASK
    assert mask_tokenizer.vocabulary_size == 300
    pieces = [p.decode() for p in mask_tokenizer.id_to_piece(range(6)).numpy()]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>", "<mask>", "<0x00>"]
    ids = mask_tokenizer.tokenize(texts).flat_values.numpy()
    assert MASK not in ids and ids.min() > MASK


def test_literal_mask_text_is_not_the_mask_id(mask_tokenizer):
    texts = ["<mask>", "one <mask> two", "<mask><mask>"]
    ids = mask_tokenizer.tokenize(texts)
    assert MASK not in ids.flat_values.numpy()
    assert mask_tokenizer.decode(ids) == texts


def test_without_mask_token_there_is_no_mask_id(texts, tmp_path):
    plain = SubwordTokenizer.train(texts, vocabulary_size=300)
    assert plain.mask_id is None
    assert plain.id_to_piece(MASK).numpy() == b"<0x00>"
    plain.save(tmp_path / "plain")
    assert SubwordTokenizer.load(tmp_path / "plain").mask_id is None


def test_save_and_load_keep_the_mask_id(mask_tokenizer, texts, tmp_path):
    mask_tokenizer.save(tmp_path / "tok")
    restored = SubwordTokenizer.load(tmp_path / "tok")
    assert restored.mask_id == MASK
    assert restored.model_proto == mask_tokenizer.model_proto
    assert restored.tokenize(texts).to_list() == mask_tokenizer.tokenize(texts).to_list()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"vocabulary_size": 261, "mask_token": True},
            "`vocabulary_size` must be at least 262 (4 special ids + the mask id + 256 byte "
            "pieces + 1). Received: vocabulary_size=261",
        ),
        (
            {"vocabulary_size": 5, "mask_token": True, "byte_fallback": False},
            "`vocabulary_size` must be at least 6 (4 special ids + the mask id + 1). "
            "Received: vocabulary_size=5",
        ),
        (
            {"vocabulary_size": 300, "mask_token": "yes"},
            "`mask_token` must be a bool. Received: mask_token='yes'",
        ),
    ],
)
def test_mask_token_bad_arguments_raise(texts, kwargs, message):
    with pytest.raises(ValueError) as info:
        SubwordTokenizer.train(texts, **kwargs)
    assert str(info.value) == message


def test_masking_tokenized_text_end_to_end(mask_tokenizer, texts):
    ids = mask_tokenizer.tokenize(texts)
    framed = tf.concat(
        [tf.fill([ids.nrows(), 1], START), ids, tf.fill([ids.nrows(), 1], END)], axis=1
    )
    inputs, labels = mask_tokens(
        framed, mask_tokenizer.mask_id, mask_tokenizer.vocabulary_size, seed=SEED
    )
    token_ids = inputs["token_ids"].numpy()
    assert np.mean(token_ids == MASK) > 0.05
    # Putting the labels back at their positions restores the text.
    rows = np.arange(len(texts))[:, None]
    positions, labels = inputs["mask_positions"].numpy(), labels.numpy()
    used = labels != PAD
    token_ids[np.broadcast_to(rows, positions.shape)[used], positions[used]] = labels[used]
    assert mask_tokenizer.decode(token_ids) == texts
