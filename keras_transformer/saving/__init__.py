"""Saving and sharing trained models: pretrained directories and serving exports."""

from keras_transformer.saving.huggingface import load_huggingface, save_huggingface
from keras_transformer.saving.pretrained import (
    Pretrained,
    PretrainedDirectoryError,
    load_pretrained,
    save_pretrained,
)
from keras_transformer.saving.sentence_pooling import sentence_embeddings
from keras_transformer.saving.serving import export_serving

__all__ = [
    "Pretrained",
    "PretrainedDirectoryError",
    "export_serving",
    "load_huggingface",
    "load_pretrained",
    "save_huggingface",
    "save_pretrained",
    "sentence_embeddings",
]
