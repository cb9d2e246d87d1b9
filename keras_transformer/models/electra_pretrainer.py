import keras
from keras import ops

from keras_transformer.layers.transformer_encoder import TransformerEncoder
from keras_transformer.models.encoder_model_base import EncoderModelBase, encoder_arguments
from keras_transformer.models.masked_lm import MaskedLMHead, _gelu_erf
from keras_transformer.validation import check_positive_int, is_real

GENERATOR_ARGUMENTS = (
    "generator_num_layers",
    "generator_hidden_dim",
    "generator_num_heads",
    "generator_intermediate_dim",
)
# Masked logits, as in attention: far below any real logit, finite in float32.
_NEVER = -1e9


@keras.saving.register_keras_serializable(package="keras_transformer")
class ElectraPretrainer(MaskedLMHead, EncoderModelBase):
    """ELECTRA's replaced-token detection: a generator and a discriminator trained together.

    The discriminator is the encoder of
    [`TransformerClassifier`][keras_transformer.models.TransformerClassifier]
    and [`MaskedLM`][keras_transformer.models.MaskedLM] (the `encoder` of this
    model, token embeddings plus positions and the encoder stack) with a
    per-token binary head: a dense layer of width `hidden_dim` with GELU and one
    logit per token. The generator is a smaller masked language model that
    shares the discriminator's embedding layer (token embeddings and positions):
    a dense projection to `generator_hidden_dim`, an encoder stack of that width
    and `MaskedLM`'s head, whose logits are taken against the shared token
    embeddings.

    Training takes the masked-LM batches of
    [`make_masked_lm_dataset`][keras_transformer.text.make_masked_lm_dataset]
    (`({"token_ids", "mask_positions"}, labels)`). The generator predicts the
    masked tokens; a token is sampled from its softmax at each masked position
    (the `pad_id` token never) and put in place of the original; the
    discriminator then labels every token of that text as replaced or original.
    A sampled token equal to the original counts as original. The loss
    ([`compute_loss`][keras_transformer.models.ElectraPretrainer.compute_loss])
    is the generator's masked-LM cross-entropy, averaged over the masked tokens,
    plus `discriminator_weight` times the discriminator's binary cross-entropy,
    averaged over the non-padding tokens of the rows that have a masked token.
    No gradient flows through the sampling. Compile with `loss=None` (what
    `build("replaced_token_detection",
    ...)` does): the model computes its own loss, and reports
    `generator_loss`, `discriminator_loss` and `discriminator_accuracy`
    beside it. A compiled metric such as
    [`MaskedAccuracy(pad_id)`][keras_transformer.training.MaskedAccuracy] scores
    the generator's predictions.

    Calling the model gives the generator's logits, as `MaskedLM` does;
    [`discriminate`][keras_transformer.models.ElectraPretrainer.discriminate]
    gives the discriminator's. After pretraining, the discriminator's encoder
    fine-tunes with
    [`from_encoder`][keras_transformer.models.TransformerClassifier.from_encoder]:
    `TransformerClassifier.from_encoder(pretrainer, num_classes)`.

    Inputs: int token ids `(batch, length)`, or a dict with `"token_ids"`
    and optionally `"mask_positions"`, int `(batch, num_predictions)`.
    Output: the generator's float32 logits `(batch, num_predictions,
    vocabulary_size)` at the mask positions, or `(batch, length,
    vocabulary_size)` at every position without them.

    Args:
        vocabulary_size: int.
        num_layers: int, the discriminator's blocks. Defaults to `4`.
        hidden_dim: int, the discriminator's and the embeddings' width.
            Defaults to `256`.
        num_heads: int. Defaults to `4`.
        intermediate_dim: int. Defaults to `1024`.
        dropout: float. Defaults to `0.1`.
        max_sequence_length: int; required with `position="learned"`.
            Defaults to `None`.
        position: `"sinusoidal"` (the paper's table added to the embeddings),
            `"learned"` (a trained table), `"rotary"` (queries and keys rotated
            by their position in every self-attention), `"alibi"` (a linear
            distance penalty on every self-attention's logits) or `None`; the
            generator attends with the same choice. Defaults to `"sinusoidal"`.
        norm_first: bool. Defaults to `False`.
        pad_id: int. Defaults to `0`.
        attention_dropout: float. Defaults to `0.0`.
        activation_dropout: float. Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        layer_norm_epsilon: float, of every layer normalization. Defaults to `1e-6`.
        scale_embeddings: bool, multiply the token embeddings by √d. Defaults to `True`.
        embedding_layer_norm: bool, normalize the embedding sum. Defaults to `False`.
        num_token_types: int, the size of a token-type (segment) table, as in
            `MaskedLM`. Defaults to `None`: none.
        generator_num_layers: int, the generator's blocks. Defaults to `None`:
            `num_layers`.
        generator_hidden_dim: int, the generator's width. Defaults to `None`:
            a quarter of `hidden_dim` (at least 1), ELECTRA's best ratio.
        generator_num_heads: int. Defaults to `None`: a quarter of
            `num_heads` (at least 1).
        generator_intermediate_dim: int. Defaults to `None`: a quarter of
            `intermediate_dim` (at least 1).
        discriminator_weight: positive float, the weight of the
            discriminator's loss against the generator's. Defaults to `50.0`
            (the paper's λ).
        **kwargs: base model arguments such as `name` and `dtype`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.models import ElectraPretrainer, TransformerClassifier
    >>> model = ElectraPretrainer(100, num_layers=1, hidden_dim=16, num_heads=2,
    ...                           intermediate_dim=32)
    >>> model.generator_hidden_dim, model.generator_num_heads
    (4, 1)
    >>> ids = np.array([[2, 11, 12, 13, 14, 3], [2, 21, 22, 3, 0, 0]], "int32")
    >>> x = {"token_ids": ids, "mask_positions": np.array([[2, 4], [1, 0]], "int32")}
    >>> labels = np.array([[30, 31], [40, 0]], "int32")  # 0: an unused slot
    >>> tuple(model(x).shape)  # the generator's logits at the masked positions
    (2, 2, 100)
    >>> tuple(model.discriminate(ids).shape)  # one replaced-or-not logit per token
    (2, 6)
    >>> model.compile(optimizer="adam", loss=None, run_eagerly=True)  # one tiny step
    >>> history = model.fit(x, labels, epochs=1, verbose=0)
    >>> sorted(history.history)
    ['discriminator_accuracy', 'discriminator_loss', 'generator_loss', 'loss']
    >>> classifier = TransformerClassifier.from_encoder(model, num_classes=2)
    >>> bool(np.all(classifier.encoder(ids) == model.encoder(ids)))
    True

    References:
        - [Clark et al., 2020](https://arxiv.org/abs/2003.10555), "ELECTRA:
          Pre-training Text Encoders as Discriminators Rather Than
          Generators", sections 2 and 3.2.
    """

    INPUT_NAMES = ("token_ids", "mask_positions")
    CONFIG_ARGUMENTS = (
        EncoderModelBase.CONFIG_ARGUMENTS + GENERATOR_ARGUMENTS + ("discriminator_weight",)
    )

    def __init__(
        self,
        vocabulary_size,
        num_layers=4,
        hidden_dim=256,
        num_heads=4,
        intermediate_dim=1024,
        dropout=0.1,
        max_sequence_length=None,
        position="sinusoidal",
        norm_first=False,
        pad_id=0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-6,
        scale_embeddings=True,
        embedding_layer_norm=False,
        num_token_types=None,
        generator_num_layers=None,
        generator_hidden_dim=None,
        generator_num_heads=None,
        generator_intermediate_dim=None,
        discriminator_weight=50.0,
        **kwargs,
    ):
        super().__init__(**encoder_arguments(locals()), **kwargs)
        # A quarter of the discriminator's width: the generator ELECTRA found best.
        defaults = {
            "generator_num_layers": num_layers,
            "generator_hidden_dim": max(1, hidden_dim // 4),
            "generator_num_heads": max(1, num_heads // 4),
            "generator_intermediate_dim": max(1, intermediate_dim // 4),
        }
        given = {
            "generator_num_layers": generator_num_layers,
            "generator_hidden_dim": generator_hidden_dim,
            "generator_num_heads": generator_num_heads,
            "generator_intermediate_dim": generator_intermediate_dim,
        }
        for name in GENERATOR_ARGUMENTS:
            value = defaults[name] if given[name] is None else given[name]
            check_positive_int(name, value)
            setattr(self, name, int(value))
        if self.generator_hidden_dim % self.generator_num_heads:
            raise ValueError(
                f"`generator_hidden_dim` ({self.generator_hidden_dim}) must be divisible by "
                f"`generator_num_heads` ({self.generator_num_heads}). Pass e.g. "
                f"generator_num_heads=1."
            )
        if (
            isinstance(discriminator_weight, bool)
            or not is_real(discriminator_weight)
            or not discriminator_weight > 0
        ):
            raise ValueError(
                "`discriminator_weight` must be a positive number, e.g. 50.0 (the paper's). "
                f"Received: discriminator_weight={discriminator_weight!r}."
            )
        self.discriminator_weight = float(discriminator_weight)

        self.embedding = self.encoder.get_layer("embedding")
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = ops.not_equal(token_ids, pad_id)
        # The generator reads the discriminator's embedding layer itself: one set of
        # token and position embeddings, trained by both losses (section 3.1).
        x = self.embedding(token_ids)
        if self.generator_hidden_dim != hidden_dim:
            x = keras.layers.Dense(
                self.generator_hidden_dim, dtype=self.dtype_policy, name="generator_projection"
            )(x)
        stack = dict(self._stack_arguments())
        stack["num_heads"] = self.generator_num_heads
        stack["intermediate_dim"] = self.generator_intermediate_dim
        x = TransformerEncoder(self.generator_num_layers, name="generator_encoder", **stack)(
            x, padding_mask=padding_mask
        )
        self.generator = keras.Model(token_ids, x, name="generator")
        self._make_head(hidden_dim, layer_norm_epsilon)
        self.discriminator_dense = keras.layers.Dense(
            hidden_dim, activation=_gelu_erf, dtype=self.dtype_policy, name="discriminator_dense"
        )
        self.discriminator_output = keras.layers.Dense(
            1, dtype=self.dtype_policy, name="discriminator_output"
        )
        self.sampling_seed = keras.random.SeedGenerator(name="sampling_seed")
        self.generator_loss_tracker = keras.metrics.Mean(name="generator_loss")
        self.discriminator_loss_tracker = keras.metrics.Mean(name="discriminator_loss")
        self.discriminator_accuracy_tracker = keras.metrics.Mean(name="discriminator_accuracy")
        self.build()

    def _build_layers(self):
        self._build_head(self.generator_hidden_dim)
        self.discriminator_dense.build((None, None, self.hidden_dim))
        self.discriminator_output.build((None, None, self.hidden_dim))

    def call(self, inputs, training=None):
        mask_positions = None
        if isinstance(inputs, dict):
            token_ids = inputs["token_ids"]
            mask_positions = inputs.get("mask_positions")
        else:
            token_ids = inputs
        hidden = self.generator(token_ids, training=training)
        return self._head_logits(hidden, self.embedding, mask_positions)

    def discriminate(self, token_ids, training=None):
        """The discriminator's logit per token: above 0 where it judges the token replaced.

        Args:
            token_ids: int `(batch, length)`.
            training: bool, apply dropout. Defaults to `None` (no dropout).

        Returns:
            float32 logits `(batch, length)`.

        Example:

        >>> from keras_transformer.models import ElectraPretrainer
        >>> model = ElectraPretrainer(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                           intermediate_dim=32)
        >>> tuple(model.discriminate(keras.ops.ones((2, 7), "int32")).shape)
        (2, 7)
        """
        hidden = self.encode(token_ids, training=training)
        logits = self.discriminator_output(self.discriminator_dense(hidden))
        return self.float32_logits(ops.squeeze(logits, axis=-1))

    def replace_tokens(self, token_ids, mask_positions, labels, generator_logits):
        """Puts a token sampled from the generator at each used mask position.

        Args:
            token_ids: int `(batch, length)`, the masked input.
            mask_positions: int `(batch, num_predictions)`.
            labels: int `(batch, num_predictions)`, the original tokens; `pad_id`
                marks an unused slot, whose position is left alone.
            generator_logits: float `(batch, num_predictions, vocabulary_size)`.

        Returns:
            `(replaced_ids, is_replaced)`: int32 `(batch, length)`, the input with
            the samples in place of the masked tokens (and the original tokens
            everywhere else), and bool `(batch, length)`, where a sample differs
            from the original token.

        Example:

        >>> import numpy as np
        >>> from keras_transformer.models import ElectraPretrainer
        >>> model = ElectraPretrainer(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                           intermediate_dim=32)
        >>> logits = np.full((1, 2, 100), -30.0, "float32")
        >>> logits[0, 0, 7] = logits[0, 1, 31] = 30.0  # the generator is sure
        >>> ids, replaced = model.replace_tokens(
        ...     np.array([[2, 4, 12, 4, 3]]), np.array([[1, 3]]), np.array([[11, 31]]), logits)
        >>> keras.ops.convert_to_numpy(ids).tolist()
        [[2, 7, 12, 31, 3]]
        >>> keras.ops.convert_to_numpy(replaced).tolist()
        [[False, True, False, False, False]]
        """
        token_ids = ops.cast(token_ids, "int32")
        mask_positions = ops.cast(mask_positions, "int32")
        labels = ops.cast(labels, "int32")
        logits = ops.stop_gradient(ops.cast(generator_logits, "float32"))
        vocabulary = ops.arange(self.vocabulary_size, dtype="int32")
        logits = ops.where(ops.equal(vocabulary, self.pad_id), _NEVER, logits)
        # Gumbel-max: the argmax of logits plus Gumbel noise is a sample of their softmax.
        uniform = keras.random.uniform(
            ops.shape(logits), minval=1e-9, maxval=1.0, seed=self.sampling_seed
        )
        samples = ops.cast(ops.argmax(logits - ops.log(-ops.log(uniform)), axis=-1), "int32")

        used = ops.not_equal(labels, self.pad_id)
        length = ops.shape(token_ids)[1]
        # slot_at[b, s, i]: slot s of row b is used and masks position i.
        slot_at = ops.logical_and(
            ops.equal(mask_positions[..., None], ops.arange(length, dtype="int32")),
            used[..., None],
        )
        masked = ops.any(slot_at, axis=1)
        weights = ops.cast(slot_at, "int32")
        sampled = ops.sum(weights * samples[..., None], axis=1)
        original = ops.sum(weights * labels[..., None], axis=1)
        replaced_ids = ops.where(masked, sampled, token_ids)
        is_replaced = ops.logical_and(masked, ops.not_equal(sampled, original))
        return replaced_ids, is_replaced

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The generator's masked-LM loss plus `discriminator_weight` times the discriminator's.

        `y_pred` is the generator's logits at the mask positions (the model's
        output); the discriminator runs here, on `x["token_ids"]` with the
        generator's samples in place
        ([`replace_tokens`][keras_transformer.models.ElectraPretrainer.replace_tokens]).
        `sample_weight` is not supported: an unused prediction slot has the
        label `pad_id` instead.

        Args:
            x: the input dict, with `"token_ids"` and `"mask_positions"`.
            y: int `(batch, num_predictions)`, the original tokens.
            y_pred: the generator's logits.
            sample_weight: must be `None`.
            training: bool, apply dropout in the discriminator.

        Returns:
            The scalar loss (float32).
        """
        if sample_weight is not None:
            raise ValueError(
                "`ElectraPretrainer` takes no `sample_weight`: give an unused prediction "
                f"slot the label `pad_id` ({self.pad_id}), as `make_masked_lm_dataset` does."
            )
        if not isinstance(x, dict) or "mask_positions" not in x or y is None:
            raise ValueError(
                "`ElectraPretrainer` trains on masked-LM batches: "
                '`({"token_ids", "mask_positions"}, labels)`, as `make_masked_lm_dataset` '
                "makes them."
            )
        token_ids = ops.cast(x["token_ids"], "int32")
        labels = ops.cast(y, "int32")
        used = ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        picked = ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        generator_loss = -ops.sum(picked * used) / ops.maximum(ops.sum(used), 1.0)

        replaced_ids, is_replaced = self.replace_tokens(
            token_ids, x["mask_positions"], labels, y_pred
        )
        logits = self.discriminate(replaced_ids, training=training)
        targets = ops.cast(is_replaced, "float32")
        # The non-padding tokens of the rows that predict something: the copies that fill
        # a fixed-shape batch have no used slot.
        row_used = ops.cast(ops.any(ops.not_equal(labels, self.pad_id), axis=1), "float32")
        weights = ops.cast(ops.not_equal(token_ids, self.pad_id), "float32") * row_used[:, None]
        # Binary cross-entropy from logits, in the form that does not overflow.
        per_token = (
            ops.maximum(logits, 0.0) - logits * targets + ops.log1p(ops.exp(-ops.abs(logits)))
        )
        count = ops.maximum(ops.sum(weights), 1.0)
        discriminator_loss = ops.sum(per_token * weights) / count
        correct = ops.cast(ops.equal(logits > 0, is_replaced), "float32")
        accuracy = ops.sum(correct * weights) / count

        self.generator_loss_tracker.update_state(generator_loss)
        self.discriminator_loss_tracker.update_state(discriminator_loss)
        self.discriminator_accuracy_tracker.update_state(accuracy)
        loss = generator_loss + self.discriminator_weight * discriminator_loss
        for extra in self.losses:
            loss = loss + ops.cast(extra, "float32")
        return loss
