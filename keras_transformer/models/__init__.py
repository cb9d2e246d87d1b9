"""Models built from the layers: encoder-decoder, encoder classifier, masked LM, ELECTRA,
decoder-only LM."""

from keras_transformer.models.electra_pretrainer import ElectraPretrainer
from keras_transformer.models.factory import build
from keras_transformer.models.keras_hub_conversion import from_keras_hub
from keras_transformer.models.masked_lm import MaskedLM
from keras_transformer.models.presets import PRESETS
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.models.transformer_classifier import TransformerClassifier
from keras_transformer.models.transformer_lm import TransformerLM

__all__ = [
    "PRESETS",
    "ElectraPretrainer",
    "MaskedLM",
    "Seq2SeqTransformer",
    "TransformerClassifier",
    "TransformerLM",
    "build",
    "from_keras_hub",
]
