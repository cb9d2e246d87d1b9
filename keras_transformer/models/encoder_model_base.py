"""What the encoder-only models share: the embedding + encoder stack, and moving it between them."""

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.transformer_encoder import TransformerEncoder
from keras_transformer.models.transformer_model_base import TransformerModelBase
from keras_transformer.validation import check_positive_int

# The arguments that fix the encoder's weights and what it computes with them: two encoders
# agreeing on all of these can exchange weights. Dropout rates are free to differ.
ENCODER_ARCHITECTURE = (
    "vocabulary_size",
    "num_layers",
    "hidden_dim",
    "num_heads",
    "intermediate_dim",
    "max_sequence_length",
    "position",
    "norm_first",
    "pad_id",
    "activation",
    "layer_norm_epsilon",
    "scale_embeddings",
    "embedding_layer_norm",
    "num_token_types",
)
ENCODER_DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")


def encoder_arguments(arguments):
    """The encoder's arguments out of a task model's `__init__` arguments (its `locals()`)."""
    return {name: arguments[name] for name in ENCODER_ARCHITECTURE + ENCODER_DROPOUTS}


class EncoderModelBase(TransformerModelBase):
    """Base of `TransformerClassifier`, `MaskedLM` and `ElectraPretrainer` (not public).

    Builds `self.encoder`, a functional `keras.Model` from int token ids
    `(batch, length)` to hidden states `(batch, length, hidden_dim)`: token
    embeddings plus positions, then the encoder stack, with `pad_id` masked.
    A task model adds its head on top. Because every encoder-only model holds
    the same `encoder`, a pretrained one (e.g. a `MaskedLM`) can hand its
    weights to another (e.g. a `TransformerClassifier`): see
    `copy_encoder_weights`.
    """

    CONFIG_ARGUMENTS = ENCODER_ARCHITECTURE + ENCODER_DROPOUTS

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        hidden_dim,
        num_heads,
        intermediate_dim,
        dropout,
        max_sequence_length,
        position,
        norm_first,
        pad_id,
        attention_dropout,
        activation_dropout,
        activation,
        layer_norm_epsilon,
        scale_embeddings,
        embedding_layer_norm,
        num_token_types=None,
        **kwargs,
    ):
        super().__init__(pad_id=pad_id, **kwargs)
        self._check_dims(
            vocabulary_size=vocabulary_size, num_layers=num_layers, hidden_dim=hidden_dim
        )
        check_positive_int("intermediate_dim", intermediate_dim)
        self._keep_arguments(locals())

        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = ops.not_equal(token_ids, pad_id)
        embedding = self._embedding(
            vocabulary_size,
            name="embedding",
            scale_embeddings=scale_embeddings,
            layer_norm=embedding_layer_norm,
            layer_norm_epsilon=layer_norm_epsilon,
            num_token_types=num_token_types,
        )
        if num_token_types is None:
            inputs = token_ids
            x = embedding(token_ids)
        else:
            token_type_ids = keras.Input((None,), dtype="int32", name="token_type_ids")
            inputs = {"token_ids": token_ids, "token_type_ids": token_type_ids}
            x = embedding(token_ids, token_type_ids=token_type_ids)
        x = TransformerEncoder(num_layers, name="transformer_encoder", **self._stack_arguments())(
            x, padding_mask=padding_mask
        )
        self.encoder = keras.Model(inputs, x, name="encoder")

    def encode(self, inputs, training=None):
        """Hidden states `(batch, length, hidden_dim)` of the encoder.

        Args:
            inputs: int token ids `(batch, length)` (a tensor, a NumPy array or
                a list of equal-length rows), or a dict with `"token_ids"`
                and, for a model built with `num_token_types`, optionally
                `"token_type_ids"` (type 0 where absent), each given in any of
                those forms. Other keys are ignored.
            training: bool, whether dropout is active. Defaults to `None`.

        Returns:
            A float tensor `(batch, length, hidden_dim)`.

        Example:

        >>> import numpy as np
        >>> from keras_transformer.models import MaskedLM
        >>> model = MaskedLM(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                  intermediate_dim=32, num_token_types=2)
        >>> tuple(model.encode(np.array([[5, 6, 0]])).shape)
        (1, 3, 16)
        """
        if not isinstance(inputs, dict):
            inputs = {"token_ids": inputs}
        token_ids = _as_tensor(inputs["token_ids"])
        token_type_ids = _as_tensor(inputs.get("token_type_ids"))
        if self.num_token_types is None:
            if token_type_ids is not None:
                raise ValueError(
                    "`token_type_ids` were passed, but this model has no token types. Build "
                    "it with `num_token_types=...` (BERT: 2), or leave them out."
                )
            return self.encoder(token_ids, training=training)
        if token_type_ids is None:
            token_type_ids = ops.zeros_like(token_ids)
        return self.encoder(
            {"token_ids": token_ids, "token_type_ids": token_type_ids}, training=training
        )

    def export_input_signature(self):
        signature = super().export_input_signature()
        if self.num_token_types is not None:
            signature["token_type_ids"] = keras.InputSpec(
                shape=(None, None), dtype="int32", name="token_type_ids"
            )
        return signature

    def encoder_config(self):
        """The arguments that define the encoder's weights (no dropout rates), as a dict.

        Two encoder-only models whose `encoder_config()` are equal can exchange
        encoder weights
        ([`from_encoder`][keras_transformer.models.TransformerClassifier.from_encoder]
        of `TransformerClassifier`).

        Returns:
            A dict from argument names (`vocabulary_size`, `num_layers`,
            `hidden_dim`, ...) to their values.

        Example:

        >>> from keras_transformer.models import MaskedLM
        >>> model = MaskedLM(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                  intermediate_dim=32)
        >>> config = model.encoder_config()
        >>> config["vocabulary_size"], config["hidden_dim"], "dropout" in config
        (100, 16, False)
        """
        return {name: getattr(self, name) for name in ENCODER_ARCHITECTURE}


def _as_tensor(values):
    """A tensor for NumPy arrays and nested lists; tensors (symbolic too) and `None` as given.

    The encoder is a functional model called with a dict: Keras refuses a dict
    mixing tensors and arrays, and the type ids made here are tensors.
    """
    if isinstance(values, (np.ndarray, np.generic, list, tuple)):
        return ops.convert_to_tensor(np.asarray(values), "int32")
    return values


def _describe(value):
    return keras.activations.serialize(value) if callable(value) else value


def copy_encoder_weights(source, target):
    """Copies `source.encoder`'s weights into `target.encoder`.

    Args:
        source: an encoder-only model (`MaskedLM`, `TransformerClassifier`).
        target: another one, whose encoder has the same architecture.

    Raises:
        ValueError: naming every argument on which the two encoders differ,
            with both values.
    """
    for name, model in (("source", source), ("target", target)):
        if not isinstance(model, EncoderModelBase):
            raise ValueError(
                f"`{name}` must be an encoder-only model of this library (`MaskedLM`, "
                f"`ElectraPretrainer`, `TransformerClassifier`). Received: {type(model).__name__}."
            )
    source_config, target_config = source.encoder_config(), target.encoder_config()
    differences = [
        f"{name}: {_describe(source_config[name])!r} in the pretrained encoder, "
        f"{_describe(target_config[name])!r} in the {type(target).__name__}"
        for name in ENCODER_ARCHITECTURE
        if _describe(source_config[name]) != _describe(target_config[name])
    ]
    if differences:
        raise ValueError(
            "The encoders differ, so the weights cannot be copied: "
            + "; ".join(differences)
            + ". Build the new model with the pretrained encoder's sizes (e.g. "
            "`TransformerClassifier.from_encoder(pretrained, num_classes)`)."
        )
    target.encoder.set_weights(source.encoder.get_weights())
