"""Data- and model-parallel training on Keras' engines: `keras.distribution` and `tf.distribute`."""

from keras_transformer.distribution.layout_map import get_layout_map
from keras_transformer.distribution.mesh import (
    format_mesh,
    join_hosts,
    make_distribution,
    parse_mesh,
)
from keras_transformer.distribution.simulation import simulate_cpu_devices

__all__ = [
    "format_mesh",
    "get_layout_map",
    "join_hosts",
    "make_distribution",
    "parse_mesh",
    "simulate_cpu_devices",
]
