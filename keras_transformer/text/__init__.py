"""Text preprocessing for translation: subword tokenizer and tf.data pipeline.

Unlike the layers, this package is TensorFlow-specific (tf.data, tensorflow-text).
"""

from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.text.translation_dataset import (
    length_bucket_boundaries,
    make_translation_dataset,
    tokenize_source,
    tokenize_target,
)

__all__ = [
    "SubwordTokenizer",
    "length_bucket_boundaries",
    "make_translation_dataset",
    "tokenize_source",
    "tokenize_target",
]
