"""Label-smoothed cross-entropy over padded token sequences."""

import keras
from keras import ops

from keras_transformer import compat
from keras_transformer.ops import get_keras_mask
from keras_transformer.ops.cross_entropy import label_smoothed_cross_entropy
from keras_transformer.training.sparse_labels import sparse_labels
from keras_transformer.validation import is_int, is_real


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    r"""Token-level cross-entropy with label smoothing and padding ignored.

    Takes sparse integer labels `y_true` of shape `(batch, length)` and
    per-token logits (or probabilities) `y_pred` of shape
    `(batch, length, vocab_size)`.

    Smoothing convention: with $\varepsilon$ = `label_smoothing` and $V$ =
    `vocab_size`, the target distribution is
    $(1 - \varepsilon)\,\operatorname{onehot}(y) + \varepsilon / V$ on every class
    ($y$ the label), so the true class gets $1 - \varepsilon + \varepsilon / V$ and
    each other class $\varepsilon / V$. The per-token loss is the cross-entropy
    against that target, with $p$ the predicted probabilities,

    $$
    \mathcal{L} = (1 - \varepsilon)\,(-\log p_y)
        + \varepsilon \cdot \frac{1}{V} \sum_k (-\log p_k).
    $$

    This is the convention of `keras.losses.CategoricalCrossentropy(label_smoothing=...)`
    and Szegedy et al.; fairseq's `label_smoothed_cross_entropy` instead spreads
    $\varepsilon / (V - 1)$ over the wrong classes only, which differs by
    $O(\varepsilon / V)$. The loss is a cross-entropy, not a KL divergence, so with
    $\varepsilon > 0$ its minimum is the target's entropy rather than zero.

    Padding: tokens whose label equals `pad_id` contribute nothing, and
    the default `"sum_over_batch_size"` reduction divides by the number of
    non-pad tokens, so appending padding never changes the loss. A Keras mask
    carried by `y_pred` (e.g. from `Embedding(mask_zero=True)`) is combined
    with the padding mask by logical AND, so a position masked by both is
    still dropped once. Sample weights multiply the per-token losses; a weight
    of shape `(batch,)` weighs whole sequences. A batch with no non-pad token
    gives a loss of `0`.

    The computation runs in float32 whatever the dtype of `y_pred` (e.g.
    float16 or bfloat16 logits under mixed precision).

    Args:
        label_smoothing: float in `[0, 1)`, the smoothing mass $\varepsilon$. `0` gives
            the plain sparse categorical cross-entropy. Defaults to `0.1`,
            the paper's value.
        pad_id: int or `None`, the label of padding tokens, which are ignored.
            `None` counts every token. Defaults to `0`.
        from_logits: bool, whether `y_pred` holds logits (`True`) or
            probabilities that sum to one over the last axis (`False`).
            Defaults to `True`.
        reduction: the Keras reduction: `"sum_over_batch_size"` or `"mean"`
            (mean over non-pad tokens), `"mean_with_sample_weight"` (divide by
            the summed weights of non-pad tokens), `"sum"`, or `None`/`"none"`
            (per-token losses of shape `(batch, length)`, zero at padding).
            Defaults to `"sum_over_batch_size"`.
        name: string, the loss name. Defaults to `"label_smoothed_cross_entropy"`.

    Example:

    Uniform logits over 32 classes cost `log(32)` per token, smoothing or not;
    the two pad tokens count for nothing:

    >>> loss = LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=0)
    >>> labels = keras.ops.convert_to_tensor([[5, 7, 2, 0, 0]])
    >>> round(float(loss(labels, keras.ops.zeros((1, 5, 32)))), 4)
    3.4657

    Confident right logits cost more with smoothing than without, as the
    smoothed target keeps $\varepsilon$ of its mass on the other classes:

    >>> confident = 5.0 * keras.ops.one_hot(labels, 32)
    >>> round(float(loss(labels, confident)), 4)
    0.6741
    >>> round(float(LabelSmoothedCrossEntropy(label_smoothing=0.0)(labels, confident)), 4)
    0.1897

    In a model: `model.compile(optimizer=paper_optimizer(512), loss=loss)`.

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.4.
        Szegedy et al., "Rethinking the Inception Architecture for Computer
        Vision", 2016, section 7.
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=0,
        from_logits=True,
        reduction="sum_over_batch_size",
        name="label_smoothed_cross_entropy",
    ):
        if not is_real(label_smoothing) or not 0 <= label_smoothing < 1:
            raise ValueError(
                "`label_smoothing` must be a float in [0, 1). "
                f"Received: label_smoothing={label_smoothing!r}. Use 0.1 for the paper's "
                "setting, or 0 to disable smoothing."
            )
        if pad_id is not None and (not is_int(pad_id)):
            raise ValueError(
                f"`pad_id` must be an integer token id or `None`. Received: pad_id={pad_id!r}. "
                "Pass the id your tokenizer uses for padding, or `None` to count every token."
            )
        if not isinstance(from_logits, bool):
            raise ValueError(
                f"`from_logits` must be a bool. Received: from_logits={from_logits!r}. "
                "Use `True` when `y_pred` holds unnormalised scores."
            )
        # float32 whatever the global floatx or the logits' dtype: log-softmax
        # and the sum over the vocabulary lose too much precision in 16 bits.
        super().__init__(name=name, reduction=reduction, dtype="float32")
        self.label_smoothing = float(label_smoothing)
        self.pad_id = None if pad_id is None else int(pad_id)
        self.from_logits = from_logits

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            # Keras only lines up weights that differ from the losses by a
            # trailing axis of size 1; give per-sequence `(batch,)` weights
            # trailing axes so that they broadcast over the tokens.
            sample_weight = ops.convert_to_tensor(sample_weight)
            while len(sample_weight.shape) < ops.ndim(y_pred) - 1:
                sample_weight = ops.expand_dims(sample_weight, -1)
            if self.pad_id is not None or get_keras_mask(y_pred) is not None:
                # Keras then merges the weights into the token mask in place
                # (`sample_weight *= mask`), which PyTorch refuses for a
                # `(batch, 1)` weight against a `(batch, length)` mask; give the
                # weights the mask's shape, as the product has on other backends.
                # A product rather than `broadcast_to`: PyTorch cannot write in
                # place into a broadcast view either.
                sample_weight = sample_weight * ops.ones(
                    ops.shape(y_pred)[:-1], dtype=sample_weight.dtype
                )
        return super().__call__(y_true, y_pred, sample_weight=sample_weight)

    def call(self, y_true, y_pred):
        y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
        labels = sparse_labels(y_true, y_pred)

        valid = None
        if self.pad_id is not None:
            valid = ops.not_equal(labels, self.pad_id)
            # A pad id outside [0, vocab_size) (e.g. -100) has no one-hot column.
            labels = ops.where(valid, labels, ops.zeros_like(labels))

        if self.from_logits:
            # Written out with its gradient: half the passes over the logits of autodiff.
            losses = label_smoothed_cross_entropy(labels, y_pred, self.label_smoothing)
        else:
            losses = self._from_probabilities(labels, y_pred)

        if valid is not None:
            # `where`, not a multiplication: log-probabilities at padded
            # positions may be -inf (e.g. zero probabilities), and 0 * inf is NaN.
            losses = ops.where(valid, losses, ops.zeros_like(losses))
            # The base class ANDs this with any Keras mask on `y_pred` and
            # averages over the surviving tokens only.
            compat.set_keras_mask(losses, valid)
        return losses

    def _from_probabilities(self, labels, probabilities):
        log_probs = ops.log(ops.clip(probabilities, keras.config.epsilon(), 1.0))
        # A dense one-hot product rather than a gather: the gather's gradient
        # scatters into a (batch, length, vocab) tensor, which took longer than
        # the rest of the loss together on CPU.
        vocabulary_size = ops.shape(log_probs)[-1]
        one_hot = ops.one_hot(labels, vocabulary_size, dtype="float32")
        # ε/V on each of the V classes: the docstring's target distribution.
        target = (1.0 - self.label_smoothing) * one_hot + (
            self.label_smoothing / ops.cast(vocabulary_size, "float32")
        )
        return -ops.sum(log_probs * target, axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "label_smoothing": self.label_smoothing,
                "pad_id": self.pad_id,
                "from_logits": self.from_logits,
            }
        )
        return config
