import keras
from keras import ops

from keras_transformer.layers.token_and_position_embedding import TokenAndPositionEmbedding
from keras_transformer.layers.transformer_encoder import TransformerEncoder
from keras_transformer.layers.validation import check_one_of, check_positive_int
from keras_transformer.models.transformer_model_base import TransformerModelBase

POOLINGS = ("mean", "cls")


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerClassifier(TransformerModelBase):
    """A Transformer encoder with a classification head.

    Token embeddings (×√d) plus positions, the encoder stack, pooling over the
    sequence (`"mean"` over real tokens, or `"cls"`: the first token's state),
    dropout, and a dense layer to `num_classes` float32 logits.

    The encoder part is `model.encoder`, a functional `keras.Model` from token
    ids to hidden states: save its weights (`model.encoder.save_weights`) and
    load them into another classifier of the same shape to fine-tune it on a
    new task.

    Inputs are int token ids `(batch, length)` (or a dict with key
    `"token_ids"`); the output is `(batch, num_classes)` logits.

    Args:
        vocabulary_size: int.
        num_classes: int.
        num_layers: int. Defaults to `4`.
        hidden_dim: int. Defaults to `256`.
        num_heads: int. Defaults to `4`.
        intermediate_dim: int. Defaults to `1024`.
        pooling: `"mean"` or `"cls"`. Defaults to `"mean"`.
        dropout: float. Defaults to `0.1`.
        max_sequence_length: int; required with `position="learned"`.
            Defaults to `None`.
        position: `"sinusoidal"`, `"learned"` or `None`. Defaults to `"sinusoidal"`.
        norm_first: bool. Defaults to `False`.
        pad_id: int. Defaults to `0`.
        attention_dropout: float. Defaults to `0.0`.
        activation_dropout: float. Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        **kwargs: base model arguments such as `name` and `dtype`.

    Example:

    >>> model = TransformerClassifier(100, num_classes=2, num_layers=1,
    ...                               hidden_dim=16, num_heads=2, intermediate_dim=32)
    >>> model(keras.ops.ones((3, 7), "int32")).shape
    (3, 2)
    """

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
        **kwargs,
    ):
        super().__init__(pad_id=pad_id, **kwargs)
        self._check_dims(
            vocabulary_size=vocabulary_size,
            num_classes=num_classes,
            num_layers=num_layers,
            hidden_dim=hidden_dim,
        )
        check_one_of("pooling", pooling, POOLINGS)
        check_positive_int("intermediate_dim", intermediate_dim)
        self.vocabulary_size = vocabulary_size
        self.num_classes = num_classes
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.pooling = pooling
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.position = position
        self.norm_first = norm_first
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon

        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = ops.not_equal(token_ids, pad_id)
        x = TokenAndPositionEmbedding(
            vocabulary_size,
            hidden_dim,
            sequence_length=max_sequence_length,
            position=position,
            mask_zero=False,
            dropout=dropout,
            dtype=self.dtype_policy,
            name="embedding",
        )(token_ids)
        x = TransformerEncoder(
            num_layers,
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=activation,
            norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="transformer_encoder",
        )(x, padding_mask=padding_mask)
        self.encoder = keras.Model(token_ids, x, name="encoder")
        self.head_dropout = keras.layers.Dropout(dropout, name="head_dropout")
        self.classifier_head = keras.layers.Dense(
            num_classes, dtype=self.dtype_policy, name="classifier_head"
        )
        self.build()

    def _build_layers(self):
        self.classifier_head.build((None, self.hidden_dim))

    def pool(self, hidden, token_ids):
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = ops.cast(self.padding_mask(token_ids), hidden.dtype)[..., None]
        total = ops.sum(hidden * mask, axis=1)
        count = ops.maximum(ops.sum(mask, axis=1), ops.cast(1, hidden.dtype))
        return total / count

    def call(self, inputs, training=None):
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        hidden = self.encoder(token_ids, training=training)
        pooled = self.head_dropout(self.pool(hidden, token_ids), training=training)
        return self.float32_logits(self.classifier_head(pooled))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_classes": self.num_classes,
                "num_layers": self.num_layers,
                "hidden_dim": self.hidden_dim,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "pooling": self.pooling,
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
                "position": self.position,
                "norm_first": self.norm_first,
                "pad_id": self.pad_id,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
