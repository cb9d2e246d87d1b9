"""The tiny models the tests build: one place for their sizes.

`tiny_models.seq2seq(80)` is a 1 + 1-layer translation model over 80 ids; keyword
arguments replace or add any of the model's (`tiny_models.seq2seq(80, hidden_dim=32)`).
"""

from keras_transformer.models import (
    MaskedLM,
    Seq2SeqTransformer,
    TransformerClassifier,
    TransformerLM,
)

# The smallest sizes that still exercise every code path (several heads, a real FFN).
SIZES = dict(hidden_dim=16, num_heads=2, intermediate_dim=32)


def seq2seq(vocabulary_size, **overrides):
    config = dict(num_encoder_layers=1, num_decoder_layers=1, **SIZES)
    return Seq2SeqTransformer(vocabulary_size, **{**config, **overrides})


def lm(vocabulary_size, **overrides):
    return TransformerLM(vocabulary_size, **{"num_layers": 1, **SIZES, **overrides})


def masked_lm(vocabulary_size, **overrides):
    return MaskedLM(vocabulary_size, **{"num_layers": 1, **SIZES, **overrides})


def classifier(vocabulary_size, num_classes, **overrides):
    config = {"num_layers": 1, **SIZES, **overrides}
    return TransformerClassifier(vocabulary_size, num_classes, **config)
