import math

import keras
from keras import ops

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.position_embedding import PositionEmbedding
from keras_transformer.layers.projection_options import get_constraint, get_regularizer
from keras_transformer.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.validation import (
    check_bool,
    check_one_of,
    check_positive_int,
    check_rank,
    check_rate,
    is_real,
)

# Every choice of positions the models take: absolute ones added here, relative ones
# ("rotary", "alibi") computed inside attention, for which this layer adds none.
POSITIONS = ("sinusoidal", "learned", "rotary", "alibi", None)


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenAndPositionEmbedding(SublayerQuantization, keras.layers.Layer):
    """Token embedding scaled by √d, plus position encoding, plus dropout.

    The input layer of the paper's encoder and decoder: "In the embedding
    layers, we multiply those weights by √d_model" (section 3.4), then add the
    positional encoding (section 3.5) and apply dropout (section 5.4). The
    token matrix can be reused as the output projection
    ([`attend`][keras_transformer.layers.TokenAndPositionEmbedding.attend]),
    which is how the paper ties the pre-softmax linear transformation to the
    embedding.

    The default token initializer is `RandomNormal(stddev=embedding_dim**-0.5)`,
    so that the scaled embedding has unit variance like the position table.

    Args:
        vocabulary_size: int, number of tokens.
        embedding_dim: int, the model width `d_model`.
        sequence_length: int, longest sequence; required for
            `position="learned"`, ignored otherwise. Defaults to `None`.
        position: `"sinusoidal"` (the paper), `"learned"`, or `"rotary"`,
            `"alibi"` and `None`, for which this layer adds no positions (the
            first two are computed inside attention, see
            [`MultiHeadAttention`][keras_transformer.layers.MultiHeadAttention]). Defaults to
            `"sinusoidal"`.
        scale_embeddings: bool, multiply the token embeddings by
            `sqrt(embedding_dim)`. Defaults to `True`.
        mask_zero: bool, whether token id 0 is padding: the layer then
            produces a Keras mask. Defaults to `True`.
        dropout: float, dropout rate on the sum. Defaults to `0.0`.
        layer_norm: bool, normalize the sum (before dropout), as BERT does;
            the paper does not. Computed in float32 under mixed precision.
            Defaults to `False`.
        layer_norm_epsilon: float, epsilon of that layer normalization.
            Defaults to `1e-6`.
        max_wavelength: float, for the sinusoidal table. Defaults to `10000`.
        interleave_sinusoids: bool, the sinusoidal table's layout (see
            [`SinusoidalPositionEncoding`][keras_transformer.layers.SinusoidalPositionEncoding]'s
            `interleave`): `False` for Marian's sines-then-cosines. Defaults to
            `True`.
        num_token_types: int, the size of a token-type (segment) table whose
            rows are added to the sum, as BERT adds its sentence A/B
            embeddings; the call then takes `token_type_ids`. Defaults to
            `None`: no token types.
        embeddings_initializer: initializer for the token matrix. Defaults to
            `None`, meaning `RandomNormal(stddev=embedding_dim**-0.5)`.
        embeddings_regularizer: regularizer for the token matrix (as in
            `keras.layers.Embedding`). Defaults to `None`.
        embeddings_constraint: constraint for the token matrix. Defaults to
            `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: int tensor `(batch, length)` of token ids.
        token_type_ids: int tensor `(batch, length)`, with `num_token_types`.
            Defaults to `None`: type 0 everywhere.
        start_index: int or scalar tensor, position of the first token (for
            incremental decoding). Defaults to `0`.
        training: bool, whether dropout is active.

    Example:

    >>> layer = TokenAndPositionEmbedding(vocabulary_size=100, embedding_dim=16)
    >>> ids = keras.ops.convert_to_tensor([[5, 7, 9, 0]])
    >>> hidden = layer(ids)
    >>> tuple(hidden.shape)
    (1, 4, 16)
    >>> tuple(layer.attend(hidden).shape)  # logits against the tied embedding
    (1, 4, 100)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), sections 3.4, 3.5
        - [Press & Wolf, 2017](https://arxiv.org/abs/1608.05859) (tied embeddings)
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim,
        sequence_length=None,
        position="sinusoidal",
        scale_embeddings=True,
        mask_zero=True,
        dropout=0.0,
        max_wavelength=10000,
        embeddings_initializer=None,
        layer_norm=False,
        layer_norm_epsilon=1e-6,
        embeddings_regularizer=None,
        embeddings_constraint=None,
        interleave_sinusoids=True,
        num_token_types=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("embedding_dim", embedding_dim)
        check_positive_int("sequence_length", sequence_length, allow_none=True)
        check_one_of("position", position, POSITIONS)
        check_rate("dropout", dropout)
        check_positive_int("num_token_types", num_token_types, allow_none=True)
        check_bool("interleave_sinusoids", interleave_sinusoids)
        check_bool("layer_norm", layer_norm)
        if not is_real(layer_norm_epsilon) or not layer_norm_epsilon > 0:
            raise ValueError(
                "`layer_norm_epsilon` must be a positive float, e.g. 1e-6. "
                f"Received: layer_norm_epsilon={layer_norm_epsilon!r}."
            )
        if position == "learned" and sequence_length is None:
            raise ValueError(
                '`position="learned"` needs `sequence_length`, the size of the learned table. '
                'Pass `sequence_length=...` or use `position="sinusoidal"`.'
            )
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.sequence_length = sequence_length
        self.position = position
        self.scale_embeddings = scale_embeddings
        self.mask_zero = mask_zero
        self.dropout = dropout
        self.max_wavelength = max_wavelength
        self.interleave_sinusoids = interleave_sinusoids
        self.num_token_types = num_token_types
        self.embeddings_initializer = (
            None
            if embeddings_initializer is None
            else keras.initializers.get(embeddings_initializer)
        )
        self.layer_norm = layer_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        self.embeddings_regularizer = get_regularizer(
            "embeddings_regularizer", embeddings_regularizer
        )
        self.embeddings_constraint = get_constraint("embeddings_constraint", embeddings_constraint)
        self.supports_masking = mask_zero

    def build(self, inputs_shape):
        check_rank("inputs", inputs_shape, 2, "`(batch, length)` of token ids")
        initializer = self.embeddings_initializer or keras.initializers.RandomNormal(
            stddev=self.embedding_dim**-0.5
        )
        self.token_embedding = keras.layers.Embedding(
            self.vocabulary_size,
            self.embedding_dim,
            embeddings_initializer=initializer,
            embeddings_regularizer=self.embeddings_regularizer,
            embeddings_constraint=self.embeddings_constraint,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.token_embedding.build(inputs_shape)
        hidden_shape = tuple(inputs_shape) + (self.embedding_dim,)
        if self.position == "sinusoidal":
            self.position_embedding = SinusoidalPositionEncoding(
                self.max_wavelength,
                interleave=self.interleave_sinusoids,
                dtype=self.dtype_policy,
                name="position_encoding",
            )
        elif self.position == "learned":
            self.position_embedding = PositionEmbedding(
                self.sequence_length, dtype=self.dtype_policy, name="position_embedding"
            )
        else:
            self.position_embedding = None
        if self.position_embedding is not None:
            self.position_embedding.build(hidden_shape)
        self.token_type_embedding = None
        if self.num_token_types is not None:
            self.token_type_embedding = keras.layers.Embedding(
                self.num_token_types,
                self.embedding_dim,
                embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=self.embedding_dim**-0.5
                ),
                dtype=self.dtype_policy,
                name="token_type_embedding",
            )
            self.token_type_embedding.build(inputs_shape)
        self.embedding_layer_norm = None
        if self.layer_norm:
            self.embedding_layer_norm = LayerNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="embedding_layer_norm",
            )
            self.embedding_layer_norm.build(hidden_shape)
        self.embedding_dropout = Dropout(
            self.dropout, dtype=self.dtype_policy, name="embedding_dropout"
        )
        self.built = True

    @property
    def embeddings(self):
        """The token matrix, `(vocabulary_size, embedding_dim)`."""
        return self.token_embedding.embeddings

    def call(self, inputs, token_type_ids=None, start_index=0, training=None):
        # Keras's int8 / int4 embedding divides by its float32 scales after casting, so
        # under mixed precision it returns float32: back to the compute dtype.
        x = ops.cast(self.token_embedding(inputs), self.compute_dtype)
        if self.scale_embeddings:
            x = x * ops.cast(math.sqrt(self.embedding_dim), x.dtype)
        if self.position_embedding is not None:
            x = x + self.position_embedding(x, start_index=start_index)
        if self.token_type_embedding is not None:
            if token_type_ids is None:
                token_type_ids = ops.zeros_like(inputs)
            x = x + ops.cast(self.token_type_embedding(token_type_ids), x.dtype)
        elif token_type_ids is not None:
            raise ValueError(
                "`token_type_ids` were passed, but this layer has no token-type table. "
                "Build it with `num_token_types=...`, or leave `token_type_ids` out."
            )
        if self.embedding_layer_norm is not None:
            x = self.embedding_layer_norm(x)
        return self.embedding_dropout(x, training=training)

    def attend(self, inputs):
        """Logits `inputs @ embeddingsᵀ`, shape `(..., vocabulary_size)`, in the input dtype.

        The output projection tied to the token embedding (section 3.4). After
        `model.quantize` the table is read through the embedding layer itself,
        which applies the quantisation scales (its `embeddings` holds the raw
        integers).
        """
        if self.token_embedding.quantization_mode is None:
            embeddings = self.token_embedding.embeddings
        else:
            embeddings = self.token_embedding(ops.arange(self.vocabulary_size, dtype="int32"))
        embeddings = ops.cast(embeddings, inputs.dtype)
        return ops.matmul(inputs, ops.transpose(embeddings))

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape) + (self.embedding_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "sequence_length": self.sequence_length,
                "position": self.position,
                "scale_embeddings": self.scale_embeddings,
                "mask_zero": self.mask_zero,
                "dropout": self.dropout,
                "max_wavelength": self.max_wavelength,
                "interleave_sinusoids": self.interleave_sinusoids,
                "num_token_types": self.num_token_types,
                "embeddings_initializer": (
                    None
                    if self.embeddings_initializer is None
                    else keras.initializers.serialize(self.embeddings_initializer)
                ),
                "layer_norm": self.layer_norm,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "embeddings_regularizer": keras.regularizers.serialize(self.embeddings_regularizer),
                "embeddings_constraint": keras.constraints.serialize(self.embeddings_constraint),
            }
        )
        return config
