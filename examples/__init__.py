"""Runnable examples built on `keras_transformer`."""
