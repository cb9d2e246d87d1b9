"""Keras 3 layers and models for the Transformer of "Attention Is All You Need"."""

from keras_transformer import distribution, layers, models, ops, training
from keras_transformer.version import __version__

__all__ = ["__version__", "distribution", "layers", "models", "ops", "training"]
