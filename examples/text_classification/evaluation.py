"""Scoring a classifier on a labelled dataset: predictions, accuracy and F1."""

import numpy as np
from keras import ops


def classify(model, dataset):
    """`(predicted labels, true labels, probabilities)` over a `(token_ids, labels)` dataset.

    A dataset of `(token_ids, labels, sample_weights)` (batches completed for a device mesh)
    counts only the rows of nonzero weight.
    """
    probabilities, labels = [], []
    for token_ids, batch_labels, *weights in dataset:
        logits = model(token_ids, training=False)
        batch_probabilities = ops.convert_to_numpy(ops.softmax(logits, axis=-1))
        batch_labels = np.asarray(batch_labels)
        if weights:
            real = np.asarray(weights[0]) > 0
            batch_probabilities, batch_labels = batch_probabilities[real], batch_labels[real]
        probabilities.append(batch_probabilities)
        labels.append(batch_labels)
    probabilities = np.concatenate(probabilities)
    return probabilities.argmax(-1), np.concatenate(labels), probabilities


def scores_for(predictions, labels, positive=1):
    """Accuracy and the F1 of the `positive` class, rounded to 4 digits."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    true_positive = int(np.sum((predictions == positive) & (labels == positive)))
    predicted = int(np.sum(predictions == positive))
    actual = int(np.sum(labels == positive))
    f1 = 2 * true_positive / (predicted + actual) if predicted + actual else 0.0
    return {
        "accuracy": round(float(np.mean(predictions == labels)), 4),
        "f1": round(f1, 4),
        "count": int(labels.size),
    }
