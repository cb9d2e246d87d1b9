"""The learning curve of a pretraining run: masked-token loss and accuracy against tokens seen.

Every `every_seconds` of training (and at its end) the model predicts the masked tokens of
a fixed probe: 512 training texts, one per row (up to 128 pieces), 15% of their tokens
masked once with a fixed seed. Every run scores the same probe whatever it trains with
(mask rate, packing, sequence length, objective), so the curves compare. The probe is
training text, never dev or test text: it measures how far the optimisation got, not how
well it generalises. For an ELECTRA pretrainer the probe scores its generator.
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
        )
        self.rows.append(dict(zip(FIELDS, row)))
        with open(self.path, "a", newline="", encoding="utf-8") as file:
            csv.writer(file).writerow(row)
