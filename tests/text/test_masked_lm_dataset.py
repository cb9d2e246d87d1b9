"""make_masked_lm_dataset: fixed shapes (one shape per length, the copies predict
nothing) and packed rows."""

import numpy as np
import pytest

from keras_transformer.text import (
    SubwordTokenizer,
    classification_batch_shapes,
    make_masked_lm_dataset,
    pack_texts,
)
from tests.text.random_texts import random_texts

WORDS = "good bad film plot acting great awful movie boring moving dull witty".split()
PAD = 0


@pytest.fixture(scope="module")
def texts():
    return random_texts(WORDS, 150, 1, 39)


@pytest.fixture(scope="module")
def tokenizer(texts):
    return SubwordTokenizer.train(texts * 3, vocabulary_size=300, mask_token=True)


@pytest.mark.parametrize("max_predictions", [None, 3])
def test_fixed_shapes_give_one_shape_per_length(texts, tokenizer, max_predictions):
    dataset = make_masked_lm_dataset(
        texts,
        tokenizer,
        batch_size=16,
        max_length=64,
        seed=0,
        fixed_shapes=True,
        max_predictions=max_predictions,
    )
    plain = make_masked_lm_dataset(
        texts, tokenizer, batch_size=16, max_length=64, seed=0, max_predictions=max_predictions
    )
    slots = {
        length: min(max(1, round(0.15 * (length - 2))), max_predictions or length)
        for _, length in classification_batch_shapes(16, 64)
    }
    shapes, predicted, real_predicted = set(), 0, 0
    for inputs, labels in dataset:
        ids, positions, labels = (
            inputs["token_ids"].numpy(),
            inputs["mask_positions"].numpy(),
            labels.numpy(),
        )
        length = ids.shape[1]
        assert ids.shape == (16, length) and length in slots
        assert positions.shape == labels.shape == (16, slots[length])
        shapes.add((ids.shape, labels.shape))
        predicted += int((labels != PAD).sum())
    for _, labels in plain:
        real_predicted += int((labels.numpy() != PAD).sum())
    assert 3 <= len(shapes) <= len(slots)
    # The same texts, as many predictions: the copies completing a batch predict nothing.
    assert predicted == real_predicted


def test_packing_keeps_every_token_in_order_in_full_rows(texts, tokenizer):
    rows = pack_texts(texts, tokenizer, max_length=32, seed=3)
    order = np.random.default_rng(3).permutation(len(texts))
    expected = np.concatenate(
        [
            [tokenizer.start_id, *tokenizer.tokenize(texts[i]).numpy(), tokenizer.end_id]
            for i in order
        ]
    )
    assert rows.shape == (-(-len(expected) // 32), 32) and rows.dtype == np.int32
    np.testing.assert_array_equal(rows.reshape(-1)[: len(expected)], expected)
    assert np.all(rows.reshape(-1)[len(expected) :] == PAD)  # only the last row is padded

    dataset = make_masked_lm_dataset(
        texts, tokenizer, batch_size=8, max_length=32, mask_rate=0.4, seed=0, pack=True
    )
    batches = list(dataset)
    assert len(batches) == len(rows) // 8  # full batches only
    for inputs, labels in batches:
        assert inputs["token_ids"].shape == (8, 32)
        used = labels.numpy() != PAD
        # 40% of a full row's maskable tokens, not one per phrase.
        assert used.sum(axis=1).min() >= 10
    fixed = make_masked_lm_dataset(
        texts, tokenizer, batch_size=8, max_length=32, mask_rate=0.4, seed=0, pack=True,
        fixed_shapes=True,
    )  # fmt: skip
    assert {tuple(labels.shape) for _, labels in fixed} == {(8, round(0.4 * 32))}
    with pytest.raises(ValueError, match="fewer than one batch of 4096"):
        make_masked_lm_dataset(texts, tokenizer, batch_size=4096, max_length=32, pack=True)
