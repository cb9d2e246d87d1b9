"""The Transformer's layers, one public class per module."""

from keras_transformer.layers.activations import gelu_approximate
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.position_embedding import PositionEmbedding
from keras_transformer.layers.scaled_dot_product_attention import ScaledDotProductAttention
from keras_transformer.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from keras_transformer.layers.token_and_position_embedding import TokenAndPositionEmbedding
from keras_transformer.layers.transformer_decoder import TransformerDecoder
from keras_transformer.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_transformer.layers.transformer_encoder import TransformerEncoder
from keras_transformer.layers.transformer_encoder_block import TransformerEncoderBlock
from keras_transformer.layers.zero_rows import ZeroRows

__all__ = [
    "Dropout",
    "FeedForward",
    "LayerNormalization",
    "MultiHeadAttention",
    "PositionEmbedding",
    "ScaledDotProductAttention",
    "SinusoidalPositionEncoding",
    "TokenAndPositionEmbedding",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "ZeroRows",
    "gelu_approximate",
]
