"""make_masked_lm_dataset with fixed shapes: one shape per length, the copies predict nothing."""

import numpy as np
import pytest

from keras_transformer.text import (
    SubwordTokenizer,
    classification_batch_shapes,
    make_masked_lm_dataset,
)

WORDS = "good bad film plot acting great awful movie boring moving dull witty".split()
PAD = 0


@pytest.fixture(scope="module")
def texts():
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 40))) for _ in range(150)]


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
