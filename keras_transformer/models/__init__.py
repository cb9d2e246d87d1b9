"""Models built from the layers: encoder-decoder, encoder classifier, decoder-only LM."""

from keras_transformer.models.factory import build
from keras_transformer.models.presets import PRESETS
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.models.transformer_classifier import TransformerClassifier
from keras_transformer.models.transformer_lm import TransformerLM

__all__ = ["PRESETS", "Seq2SeqTransformer", "TransformerClassifier", "TransformerLM", "build"]
