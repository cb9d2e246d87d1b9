import keras
from keras import ops

from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.models.encoder_model_base import EncoderModelBase, encoder_arguments


def _gelu_erf(x):
    # The exact GELU through `erf`: Keras's "gelu" runs TensorFlow's `erfc`, which
    # tf2onnx cannot convert, so `export(format="onnx")` failed; equal to 1e-7.
    return 0.5 * x * (1.0 + ops.erf(x * ops.cast(0.7071067811865476, x.dtype)))


class MaskedLMHead:
    """BERT's masked-LM head, for the models that predict masked tokens (not public).

    A dense layer of width `hidden_dim` with GELU, layer normalization, and float32
    logits against a token embedding matrix plus a bias per token: `MaskedLM`'s head
    and `ElectraPretrainer`'s generator's. The layers keep `MaskedLM`'s names
    (`head_dense`, `head_layer_norm`, `output_bias`).
    """

    def _make_head(self, hidden_dim, layer_norm_epsilon):
        self.head_dense = keras.layers.Dense(
            hidden_dim, activation=_gelu_erf, dtype=self.dtype_policy, name="head_dense"
        )
        self.head_layer_norm = LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="head_layer_norm"
        )

    def _build_head(self, input_dim):
        self.head_dense.build((None, None, input_dim))
        self.head_layer_norm.build((None, None, self.head_dense.units))
        self.output_bias = self.add_weight(
            shape=(self.vocabulary_size,), initializer="zeros", name="output_bias"
        )

    def _head_logits(self, hidden, embedding, mask_positions=None):
        """float32 logits `(batch, positions, vocabulary)`, at `mask_positions` if given."""
        if mask_positions is not None:
            positions = ops.expand_dims(ops.cast(mask_positions, "int32"), -1)
            hidden = ops.take_along_axis(hidden, positions, axis=1)
        hidden = self.head_layer_norm(self.head_dense(hidden))
        logits = embedding.attend(hidden)
        return self.float32_logits(logits) + ops.cast(self.output_bias, "float32")


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLM(MaskedLMHead, EncoderModelBase):
    """A Transformer encoder with a masked-language-model head (BERT's pretraining).

    Token embeddings plus positions and the encoder stack (the same `encoder` as
    [`TransformerClassifier`][keras_transformer.models.TransformerClassifier]'s),
    then BERT's head: a dense layer of width `hidden_dim` with GELU, layer
    normalization, and logits against the token embedding matrix (tied, as in
    BERT) plus a bias per token. Logits are float32 even under mixed precision.

    Pretraining hides about 15% of the tokens
    ([`keras_transformer.text.mask_tokens`][] or
    [`make_masked_lm_dataset`][keras_transformer.text.make_masked_lm_dataset]) and
    trains the model to predict them. Given `"mask_positions"`, the head runs only
    at those positions: with a vocabulary of thousands, the output layer over every
    position would cost more than the encoder. Train with a loss that ignores label
    `pad_id`, so padded prediction slots do not count:
    [`LabelSmoothedCrossEntropy`][keras_transformer.training.LabelSmoothedCrossEntropy]
    and [`MaskedAccuracy`][keras_transformer.training.MaskedAccuracy]
    (`LabelSmoothedCrossEntropy(0.0, pad_id=0)`, `MaskedAccuracy(0)`), what
    [`build("masked_lm", ...)`][keras_transformer.models.build] compiles with. Then
    fine-tune the encoder with
    [`from_encoder`][keras_transformer.models.TransformerClassifier.from_encoder]:
    `TransformerClassifier.from_encoder(masked_lm, num_classes)`.

    Inputs: int token ids `(batch, length)`, or a dict with `"token_ids"` and
    optionally `"mask_positions"`, int `(batch, num_predictions)` indices
    into the sequence. Output: logits `(batch, num_predictions,
    vocabulary_size)` at the mask positions, or `(batch, length,
    vocabulary_size)` at every position without them.

    Args:
        vocabulary_size: int.
        num_layers: int. Defaults to `4`.
        hidden_dim: int. Defaults to `256`.
        num_heads: int. Defaults to `4`.
        intermediate_dim: int. Defaults to `1024`.
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

    >>> from keras_transformer.models import MaskedLM
    >>> model = MaskedLM(100, num_layers=1, hidden_dim=16, num_heads=2,
    ...                  intermediate_dim=32)
    >>> ids = keras.ops.ones((2, 7), "int32")
    >>> tuple(model(ids).shape)
    (2, 7, 100)
    >>> positions = keras.ops.convert_to_tensor([[1, 4], [2, 0]])
    >>> tuple(model({"token_ids": ids, "mask_positions": positions}).shape)
    (2, 2, 100)

    References:
        - [Devlin et al., 2019](https://arxiv.org/abs/1810.04805), "BERT:
          Pre-training of Deep Bidirectional Transformers for Language
          Understanding", section 3.1 and appendix A.1.
    """

    INPUT_NAMES = ("token_ids", "mask_positions")

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
        **kwargs,
    ):
        super().__init__(**encoder_arguments(locals()), **kwargs)
        self.embedding = self.encoder.get_layer("embedding")
        self._make_head(hidden_dim, layer_norm_epsilon)
        self.build()

    def _build_layers(self):
        self._build_head(self.hidden_dim)

    def call(self, inputs, training=None):
        mask_positions = inputs.get("mask_positions") if isinstance(inputs, dict) else None
        hidden = self.encode(inputs, training=training)
        return self._head_logits(hidden, self.embedding, mask_positions)
