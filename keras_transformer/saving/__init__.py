"""Saving and sharing trained models: pretrained directories."""

from keras_transformer.saving.pretrained import (
    Pretrained,
    PretrainedDirectoryError,
    load_pretrained,
    save_pretrained,
)

__all__ = ["Pretrained", "PretrainedDirectoryError", "load_pretrained", "save_pretrained"]
