"""The pretraining curve's replaced-token scores: the ROC area and an untouched sampling seed."""

import keras
import numpy as np

from examples.text_classification.pretraining_curve import roc_auc, score_replacements
from keras_transformer.models import ElectraPretrainer


def test_roc_auc_counts_the_pairs_a_positive_wins_with_ties_as_halves():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, size=60).astype("float32")  # many ties
    positive = rng.random(60) < 0.3
    wins = scores[positive][:, None] - scores[~positive][None, :]
    expected = (np.sum(wins > 0) + 0.5 * np.sum(wins == 0)) / wins.size
    assert roc_auc(scores, positive) == np.float64(expected)
    assert roc_auc([0.1, 0.9], [False, True]) == 1.0
    assert np.isnan(roc_auc([0.1, 0.2], [True, True]))


def test_scoring_the_discriminator_leaves_training_samples_alone():
    model = ElectraPretrainer(40, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32)
    ids = np.array([[2, 11, 12, 13, 14, 15, 3, 0], [2, 21, 22, 23, 3, 0, 0, 0]], "int32")
    inputs = {"token_ids": ids, "mask_positions": np.array([[2, 4], [1, 0]], "int32")}
    labels = np.array([[12, 14], [21, 0]], "int32")
    state = keras.ops.convert_to_numpy(model.sampling_seed.state)
    accuracy, _ = score_replacements(model, [(inputs, labels)], pad_id=0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.sampling_seed.state), state)

    # The same draw by hand: accuracy over the 12 non-padding tokens, at threshold 0.
    replaced_ids, replaced = model.replace_tokens(
        ids, inputs["mask_positions"], labels, model(inputs)
    )
    logits = keras.ops.convert_to_numpy(model.discriminate(replaced_ids))
    replaced = keras.ops.convert_to_numpy(replaced)
    used = ids != 0
    assert accuracy == np.mean((logits > 0)[used] == replaced[used])
