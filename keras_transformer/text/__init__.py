"""Text preprocessing: tokenizers, token masking and the tf.data pipelines.

Unlike the layers, this package is TensorFlow-specific (tf.data, tensorflow-text).
"""

from keras_transformer.text.byte_pair_tokenizer import BytePairTokenizer
from keras_transformer.text.classification_dataset import (
    classification_batch_shapes,
    make_classification_dataset,
    tokenize_for_classification,
)
from keras_transformer.text.marian_tokenizer import MarianTokenizer
from keras_transformer.text.masked_lm_dataset import make_masked_lm_dataset, pack_texts
from keras_transformer.text.masking import mask_tokens
from keras_transformer.text.subword_tokenizer import SubwordTokenizer
from keras_transformer.text.translation_dataset import (
    fixed_shape_lengths,
    length_bucket_boundaries,
    make_translation_dataset,
    tokenize_source,
    tokenize_target,
    translation_batch_shapes,
)
from keras_transformer.text.wordpiece_tokenizer import WordPieceTokenizer

__all__ = [
    "BytePairTokenizer",
    "MarianTokenizer",
    "SubwordTokenizer",
    "WordPieceTokenizer",
    "classification_batch_shapes",
    "fixed_shape_lengths",
    "length_bucket_boundaries",
    "make_classification_dataset",
    "make_masked_lm_dataset",
    "make_translation_dataset",
    "mask_tokens",
    "pack_texts",
    "tokenize_for_classification",
    "tokenize_source",
    "tokenize_target",
    "translation_batch_shapes",
]
