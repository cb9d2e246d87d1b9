import keras
from keras import ops

from keras_transformer.models.encoder_model_base import (
    ENCODER_DROPOUTS,
    EncoderModelBase,
    copy_encoder_weights,
    encoder_arguments,
)
from keras_transformer.validation import check_one_of, check_positive_int

POOLINGS = ("mean", "cls", "pooler")


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerClassifier(EncoderModelBase):
    """A Transformer encoder with a classification head.

    Token embeddings (×√d) plus positions, the encoder stack, pooling over the
    sequence (`"mean"` over real tokens, or `"cls"`: the first token's state),
    dropout, and a dense layer to `num_classes` float32 logits.

    The encoder part is `model.encoder`, a functional `keras.Model` from token
    ids to hidden states. `TransformerClassifier.from_encoder(pretrained,
    num_classes)` starts a classifier from a pretrained encoder (a `MaskedLM`
    or another classifier) for fine-tuning;
    [`from_keras_hub`][keras_transformer.models.from_keras_hub] converts a
    keras-hub BERT-family backbone.

    Inputs are int token ids `(batch, length)` (or a dict with key
    `"token_ids"`); the output is `(batch, num_classes)` logits.

    Args:
        vocabulary_size: int.
        num_classes: int.
        num_layers: int. Defaults to `4`.
        hidden_dim: int. Defaults to `256`.
        num_heads: int. Defaults to `4`.
        intermediate_dim: int. Defaults to `1024`.
        pooling: `"mean"`, `"cls"`, or `"pooler"`: the first token's state
            through a dense layer with tanh (BERT's pooler, `pooler_dense`).
            Defaults to `"mean"`.
        dropout: float. Defaults to `0.1`.
        max_sequence_length: int; required with `position="learned"`.
            Defaults to `None`.
        position: `"sinusoidal"` (the paper's table added to the embeddings),
            `"learned"` (a trained table), `"rotary"` (queries and keys rotated
            by their position in every self-attention), `"alibi"` (a linear
            distance penalty on every self-attention's logits) or `None`.
            Defaults to `"sinusoidal"`.
        norm_first: bool. Defaults to `False`.
        pad_id: int. Defaults to `0`.
        attention_dropout: float. Defaults to `0.0`.
        activation_dropout: float. Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        layer_norm_epsilon: float, of every layer normalization. Defaults to `1e-6`.
        scale_embeddings: bool, multiply the token embeddings by √d as the
            paper does (BERT does not). Defaults to `True`.
        embedding_layer_norm: bool, normalize the embedding sum as BERT does.
            Defaults to `False`.
        num_token_types: int, the size of a token-type (segment) table added
            to the embeddings, as BERT's sentence A/B table (2); the inputs
            may then hold `"token_type_ids"`. Defaults to `None`: none.
        **kwargs: base model arguments such as `name` and `dtype`.

    Example:

    >>> from keras_transformer.models import TransformerClassifier
    >>> model = TransformerClassifier(100, num_classes=2, num_layers=1,
    ...                               hidden_dim=16, num_heads=2, intermediate_dim=32)
    >>> tuple(model(keras.ops.ones((3, 7), "int32")).shape)
    (3, 2)
    >>> tuple(model.encoder(keras.ops.ones((3, 7), "int32")).shape)
    (3, 7, 16)
    """

    CONFIG_ARGUMENTS = EncoderModelBase.CONFIG_ARGUMENTS + ("num_classes", "pooling")

    def __init__(
        self,
        vocabulary_size,
        num_classes,
        num_layers=4,
        hidden_dim=256,
        num_heads=4,
        intermediate_dim=1024,
        pooling="mean",
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
        **kwargs,
    ):
        check_positive_int("num_classes", num_classes)
        check_one_of("pooling", pooling, POOLINGS)
        super().__init__(**encoder_arguments(locals()), **kwargs)
        self.num_classes = num_classes
        self.pooling = pooling
        self.pooler_dense = None
        if pooling == "pooler":
            self.pooler_dense = keras.layers.Dense(
                self.hidden_dim, activation="tanh", dtype=self.dtype_policy, name="pooler_dense"
            )
        self.head_dropout = keras.layers.Dropout(dropout, name="head_dropout")
        self.classifier_head = keras.layers.Dense(
            num_classes, dtype=self.dtype_policy, name="classifier_head"
        )
        self.build()

    @classmethod
    def from_encoder(cls, pretrained, num_classes, pooling="mean", **kwargs):
        """A new classifier on the encoder of `pretrained`, its weights copied.

        The encoder (embeddings, positions, blocks) takes the sizes and the
        weights of `pretrained`'s; the pooling and the dense head are new
        (randomly initialised). Fine-tune the result with `compile` and `fit`.
        To train the head alone first, freeze the encoder, and compile
        again after every change of `trainable` (Keras fixes the list of
        trained weights when it compiles):

        ```python
        classifier = TransformerClassifier.from_encoder(masked_lm, num_classes=2)
        classifier.encoder.trainable = False
        classifier.compile(optimizer, loss, metrics)
        classifier.fit(train, epochs=1)  # the head only
        classifier.encoder.trainable = True
        classifier.compile(optimizer, loss, metrics)  # recompile: now everything
        classifier.fit(train, epochs=3)
        ```

        Args:
            pretrained: an encoder-only model of this library: a
                [`MaskedLM`][keras_transformer.models.MaskedLM] (e.g. from
                [`load_pretrained(directory).model`][keras_transformer.saving.load_pretrained]), an
                [`ElectraPretrainer`][keras_transformer.models.ElectraPretrainer] (its
                discriminator's encoder) or another `TransformerClassifier`.
            num_classes: int, classes of the new head.
            pooling: `"mean"`, `"cls"` or `"pooler"`. Defaults to `"mean"`.
            **kwargs: other arguments of `TransformerClassifier`: the dropout
                rates, `name` and `dtype` may differ from `pretrained`'s; an
                encoder size given here must equal `pretrained`'s (a
                `ValueError` names both values otherwise).

        Returns:
            A `TransformerClassifier` whose `encoder` computes exactly what
            `pretrained.encoder` computes.

        Raises:
            ValueError: when `pretrained` is not an encoder-only model of this
                library, or an encoder size in `kwargs` differs from its.

        Example:

        >>> from keras_transformer.models import MaskedLM
        >>> pretrained = MaskedLM(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                       intermediate_dim=32)
        >>> classifier = TransformerClassifier.from_encoder(pretrained, num_classes=3)
        >>> tuple(classifier(keras.ops.ones((2, 5), "int32")).shape)
        (2, 3)
        >>> ids = keras.ops.convert_to_tensor([[2, 7, 8, 3]])
        >>> same = keras.ops.all(classifier.encoder(ids) == pretrained.encoder(ids))
        >>> bool(same)
        True
        """
        if not isinstance(pretrained, EncoderModelBase):
            raise ValueError(
                "`pretrained` must be an encoder-only model of this library (`MaskedLM`, "
                "`ElectraPretrainer`, `TransformerClassifier`). Received: "
                f"{type(pretrained).__name__}. A keras-hub backbone converts with `from_keras_hub`."
            )
        arguments = pretrained.encoder_config()
        arguments.update({name: getattr(pretrained, name) for name in ENCODER_DROPOUTS})
        arguments["dtype"] = pretrained.dtype_policy
        arguments.update(kwargs)
        classifier = cls(num_classes=num_classes, pooling=pooling, **arguments)
        # An encoder size given in `kwargs` that differs from `pretrained`'s fails here,
        # the error naming both values.
        copy_encoder_weights(pretrained, classifier)
        return classifier

    def _build_layers(self):
        if self.pooler_dense is not None:
            self.pooler_dense.build((None, self.hidden_dim))
        self.classifier_head.build((None, self.hidden_dim))

    def pool(self, hidden, token_ids):
        """Pools the encoder states into one vector per row, as `pooling` says.

        Args:
            hidden: float `(batch, length, hidden_dim)`, the encoder's states.
            token_ids: int `(batch, length)`, the ids they came from (for the
                padding mask of `"mean"`).

        Returns:
            float `(batch, hidden_dim)`: the mean over the real tokens
            (`"mean"`), or the first token's state (`"cls"`), through
            `pooler_dense` with `"pooler"`.
        """
        if self.pooling == "cls":
            return hidden[:, 0]
        if self.pooling == "pooler":
            return self.pooler_dense(hidden[:, 0])
        # `expand_dims`, not `[..., None]`: LiteRT has no builtin op for a strided slice that
        # adds an axis, so the indexing form needed the Flex delegate.
        mask = ops.expand_dims(ops.cast(self.padding_mask(token_ids), hidden.dtype), -1)
        total = ops.sum(hidden * mask, axis=1)
        count = ops.maximum(ops.sum(mask, axis=1), ops.cast(1, hidden.dtype))
        return total / count

    def call(self, inputs, training=None):
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        hidden = self.encode(inputs, training=training)
        pooled = self.head_dropout(self.pool(hidden, token_ids), training=training)
        return self.float32_logits(self.classifier_head(pooled))

    def enable_lora(self, rank, lora_alpha=None, target_names=None):
        """LoRA on the encoder's projections; the classification head trains in full.

        Like `TransformerModelBase.enable_lora`, which freezes every weight and
        adds the adapters, but the classification head is new for the task, so
        it stays trainable (unless the model is quantised: integer kernels do
        not train); freeze it with `model.classifier_head.trainable = False`.

        Args:
            rank: int, the rank of the adapters.
            lora_alpha: float, the adapters' scale is `lora_alpha / rank`.
                Defaults to `None` (`rank`).
            target_names: names of the projections to adapt (see
                `lora_targets`). Defaults to `None` (all six kinds).

        Raises:
            ValueError: for a `rank` that is not a positive int, unknown
                `target_names`, or a model whose LoRA is already enabled.

        Example:

        >>> model = TransformerClassifier(100, num_classes=2, num_layers=1,
        ...                               hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> model.enable_lora(rank=2)
        >>> sorted({v.path.split("/")[-1] for v in model.trainable_weights})
        ['bias', 'kernel', 'lora_kernel_a', 'lora_kernel_b']
        >>> [v.path.split("/", 1)[1] for v in model.trainable_weights if "lora" not in v.path]
        ['classifier_head/kernel', 'classifier_head/bias']

        References:
            - [Hu et al., 2021](https://arxiv.org/abs/2106.09685)
        """
        super().enable_lora(rank, lora_alpha=lora_alpha, target_names=target_names)
        if self.classifier_head.quantization_mode is None:
            for variable in self.classifier_head.weights:
                variable.trainable = True
