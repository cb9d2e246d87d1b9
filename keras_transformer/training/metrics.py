"""Token accuracy over padded sequences."""

import keras
from keras import ops

from keras_transformer.ops import get_keras_mask
from keras_transformer.training.sparse_labels import sparse_labels
from keras_transformer.validation import is_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of non-pad tokens whose arg-max prediction is the label.

    A token counts as right when its label's score is the highest score and no
    lower id scores as high: a tie goes to the lowest id, as with `argmax` (ties
    are common in `bfloat16` scores over a large vocabulary).

    Takes sparse integer labels `y_true` of shape `(batch, length)` and
    per-token scores (logits or probabilities) `y_pred` of shape
    `(batch, length, vocab_size)`. The metric is stateful: it accumulates the
    number of correct tokens and the number of counted tokens over every batch
    seen since the last `reset_state()`, so the result is a token-weighted
    accuracy rather than a mean of per-batch accuracies.

    A token is counted when its label differs from `pad_id` and, if `y_pred`
    carries a Keras mask, when that mask is `True`. Sample weights of shape
    `(batch,)` or `(batch, length)` weigh both counts.

    Args:
        pad_id: int or `None`, the label of padding tokens, which are not
            counted. `None` counts every token. Defaults to `0`.
        name: string, the metric name. Defaults to `"masked_accuracy"`.
        dtype: the dtype of the result. Defaults to `None` (the global floatx).

    Example:

    Two real tokens, one predicted right; the pad token is not counted:

    >>> metric = MaskedAccuracy(pad_id=0)
    >>> scores = keras.ops.one_hot(keras.ops.convert_to_tensor([[3, 2, 0]]), 5)
    >>> metric.update_state([[3, 1, 0]], scores)
    >>> float(metric.result())
    0.5

    A second batch with one real token, right: 2 of 3 tokens so far.

    >>> labels = keras.ops.convert_to_tensor([[4, 0, 0]])
    >>> metric.update_state(labels, keras.ops.one_hot(labels, 5))
    >>> round(float(metric.result()), 4)
    0.6667

    In a model: `model.compile(loss=LabelSmoothedCrossEntropy(), metrics=[MaskedAccuracy()])`.

    References:
        Vaswani et al., "Attention Is All You Need", 2017.
    """

    def __init__(self, pad_id=0, name="masked_accuracy", dtype=None):
        if pad_id is not None and (not is_int(pad_id)):
            raise ValueError(
                f"`pad_id` must be an integer token id or `None`. Received: pad_id={pad_id!r}. "
                "Pass the id your tokenizer uses for padding, or `None` to count every token."
            )
        super().__init__(name=name, dtype=dtype)
        self.pad_id = None if pad_id is None else int(pad_id)
        # float32 counters even under a float16 policy, which counts exactly only to 2048.
        self.correct = self.add_variable(
            shape=(), initializer="zeros", dtype="float32", name="correct"
        )
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        # Named, so that a profile tells the metric's ops from the loss gradient's.
        with keras.name_scope(self.name):
            self._update_state(y_true, y_pred, sample_weight)

    def _update_state(self, y_true, y_pred, sample_weight):
        keras_mask = get_keras_mask(y_pred)
        y_pred = ops.convert_to_tensor(y_pred)
        labels = sparse_labels(y_true, y_pred)
        # The label's score against the best score rather than an arg-max: two reductions
        # over the (batch, length, vocab_size) scores (the best score, then a lower id
        # reaching it) take half the time of `ops.argmax` on floats with TensorFlow.
        # A tie goes to the lowest id, as with an arg-max: bfloat16 scores over 8,000
        # ids tie for the best often enough to add 0.1-0.3 points of accuracy otherwise.
        # A label outside the vocabulary (a pad id such as -100) is never right, and is
        # clipped first because TensorFlow's gather rejects it.
        vocab_size = ops.shape(y_pred)[-1]
        in_vocabulary = ops.logical_and(ops.greater_equal(labels, 0), ops.less(labels, vocab_size))
        gathered = ops.clip(labels, 0, vocab_size - 1)
        label_scores = ops.squeeze(
            ops.take_along_axis(y_pred, ops.expand_dims(gathered, -1), axis=-1), axis=-1
        )
        best_scores = ops.max(y_pred, axis=-1)
        lower_id_is_best = ops.any(
            ops.logical_and(
                ops.greater_equal(y_pred, ops.expand_dims(best_scores, -1)),
                ops.less(ops.arange(vocab_size, dtype="int32"), ops.expand_dims(gathered, -1)),
            ),
            axis=-1,
        )

        weights = ops.ones(ops.shape(labels), dtype="float32")
        if self.pad_id is not None:
            weights = weights * ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        if keras_mask is not None:
            weights = weights * ops.cast(keras_mask, "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
            while len(sample_weight.shape) < len(weights.shape):
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight

        hits = ops.cast(
            ops.logical_and(
                ops.logical_and(in_vocabulary, ops.greater_equal(label_scores, best_scores)),
                ops.logical_not(lower_id_is_best),
            ),
            "float32",
        )
        self.correct.assign_add(ops.sum(hits * weights))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.cast(ops.divide_no_nan(self.correct, self.count), self.dtype)

    def get_config(self):
        config = super().get_config()
        config["pad_id"] = self.pad_id
        return config
