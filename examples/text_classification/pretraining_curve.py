"""The learning curve of a pretraining run: masked-token loss and accuracy against tokens seen.

Every `every_seconds` of training (and at its end) the model predicts the masked tokens of
a fixed probe: 512 training texts, one per row (up to 128 pieces), 15% of their tokens
masked once with a fixed seed. Every run scores the same probe whatever it trains with
(mask rate, packing, sequence length, objective), so the curves compare. The probe is
training text, never dev or test text: it measures how far the optimisation got, not how
well it generalises. For an ELECTRA pretrainer the probe scores its generator, and its
discriminator on the probe with the generator's samples in place of the masked tokens:
accuracy, and the area under the ROC curve of its logits for replaced against original
tokens (0.5: no better than chance). The area shows a discriminator learning before its
accuracy leaves the base rate, the share of original tokens.
"""

import csv
import time

import keras
import numpy as np

PROBE_TEXTS = 512
PROBE_LENGTH = 128
PROBE_MASK_RATE = 0.15
PROBE_SEED = 1234
FIELDS = (
    "minutes",
    "steps",
    "tokens_seen",
    "predictions_seen",
    "train_loss",
    "probe_loss",
    "probe_masked_accuracy",
    "probe_replaced_accuracy",
    "probe_replaced_auc",
)


def count_tokens(dataset, pad_id):
    """`(dataset, counters)`: the same batches, counting their non-pad tokens and predictions.

    The counters are `tf.Variable`s the input pipeline adds to as it makes each batch
    (a few batches ahead of training, which the curve's resolution does not see).
    """
    import tensorflow as tf

    tokens = tf.Variable(0, dtype=tf.int64, trainable=False)
    predictions = tf.Variable(0, dtype=tf.int64, trainable=False)

    def count(inputs, labels):
        updates = [
            tokens.assign_add(tf.reduce_sum(tf.cast(inputs["token_ids"] != pad_id, tf.int64))),
            predictions.assign_add(tf.reduce_sum(tf.cast(labels != pad_id, tf.int64))),
        ]
        with tf.control_dependencies(updates):
            return {k: tf.identity(v) for k, v in inputs.items()}, tf.identity(labels)

    return dataset.map(count), (tokens, predictions)


def probe_batches(texts, tokenizer):
    """The fixed probe: a seeded sample of `texts`, masked once, as NumPy batches."""
    from keras_transformer.text import make_masked_lm_dataset

    rng = np.random.default_rng(PROBE_SEED)
    chosen = rng.choice(len(texts), size=min(PROBE_TEXTS, len(texts)), replace=False)
    dataset = make_masked_lm_dataset(
        [texts[i] for i in sorted(chosen)],
        tokenizer,
        batch_size=64,
        max_length=PROBE_LENGTH,
        mask_rate=PROBE_MASK_RATE,
        shuffle=False,
        seed=PROBE_SEED,
    )
    return [(keras.tree.map_structure(np.asarray, x), np.asarray(y)) for x, y in dataset]


def score_probe(model, batches, pad_id):
    """`(loss, accuracy)` of the masked-token predictions over the probe's batches."""
    total_loss, correct, count = 0.0, 0, 0
    for inputs, labels in batches:
        logits = keras.ops.convert_to_numpy(model(inputs, training=False)).astype("float64")
        logits -= logits.max(axis=-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        used = labels != pad_id
        picked = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        total_loss -= float(picked[used].sum())
        correct += int((log_probs.argmax(axis=-1) == labels)[used].sum())
        count += int(used.sum())
    return total_loss / max(count, 1), correct / max(count, 1)


def roc_auc(scores, positive):
    """The area under the ROC curve: how often a positive outscores a negative (ties: half)."""
    scores = np.asarray(scores, "float64").ravel()
    positive = np.asarray(positive, bool).ravel()
    # Mann-Whitney: the positives' rank sum, tied scores sharing their mean rank.
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    first_rank = np.cumsum(counts) - counts + 1
    ranks = (first_rank + (counts - 1) / 2)[inverse]
    n_positive = int(positive.sum())
    n_negative = positive.size - n_positive
    if n_positive == 0 or n_negative == 0:
        return float("nan")
    return (ranks[positive].sum() - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative)


def score_replacements(model, batches, pad_id):
    """`(accuracy, auc)` of an ELECTRA discriminator on the probe, the generator's samples in place.

    The sampling seed's state is put back afterwards, so scoring the probe does not change
    the replacements training draws.
    """
    state = keras.ops.convert_to_numpy(model.sampling_seed.state)
    logits, replaced, used = [], [], []
    for inputs, labels in batches:
        predictions = model(inputs, training=False)
        ids, is_replaced = model.replace_tokens(
            inputs["token_ids"], inputs["mask_positions"], labels, predictions
        )
        logits.append(keras.ops.convert_to_numpy(model.discriminate(ids)).ravel())
        replaced.append(keras.ops.convert_to_numpy(is_replaced).ravel())
        used.append((np.asarray(inputs["token_ids"]) != pad_id).ravel())
    model.sampling_seed.state.assign(state)
    logits, replaced, used = (np.concatenate(a) for a in (logits, replaced, used))
    logits, replaced = logits[used], replaced[used]
    return float(np.mean((logits > 0) == replaced)), roc_auc(logits, replaced)


class PretrainingCurve(keras.callbacks.Callback):
    """Writes a row of `FIELDS` to a CSV file every `every_seconds` of training and at the end."""

    def __init__(self, path, batches, counters, pad_id, every_seconds=30.0):
        super().__init__()
        self.path, self.batches, self.counters = path, batches, counters
        self.pad_id, self.every_seconds = pad_id, every_seconds
        self.rows = []

    def on_train_begin(self, logs=None):
        self.started = time.time()
        self.scoring = 0.0  # the probe's own time is not training time
        self.steps = 0
        self.next_row = self.every_seconds
        self._write_header()

    def _training_seconds(self):
        return time.time() - self.started - self.scoring

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        self.last_loss = (logs or {}).get("loss")
        if self._training_seconds() >= self.next_row:
            self.next_row += self.every_seconds
            self._record()

    def on_train_end(self, logs=None):
        self._record()

    def _write_header(self):
        with open(self.path, "w", newline="", encoding="utf-8") as file:
            csv.writer(file).writerow(FIELDS)

    def _record(self):
        minutes = self._training_seconds() / 60
        began = time.time()
        loss, accuracy = score_probe(self.model, self.batches, self.pad_id)
        detection = ("", "")
        if hasattr(self.model, "discriminate"):
            detection = score_replacements(self.model, self.batches, self.pad_id)
            detection = tuple(round(value, 4) for value in detection)
        self.scoring += time.time() - began
        tokens, predictions = (int(counter.numpy()) for counter in self.counters)
        train_loss = getattr(self, "last_loss", None)
        row = (
            round(minutes, 3),
            self.steps,
            tokens,
            predictions,
            "" if train_loss is None else round(float(train_loss), 4),
            round(loss, 4),
            round(accuracy, 4),
            *detection,
        )
        self.rows.append(dict(zip(FIELDS, row)))
        with open(self.path, "a", newline="", encoding="utf-8") as file:
            csv.writer(file).writerow(row)
