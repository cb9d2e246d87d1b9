"""Keras's regularizer and constraint arguments, handed to every projection of a layer.

`keras.layers.MultiHeadAttention` passes its `kernel_regularizer`,
`bias_regularizer`, `activity_regularizer`, `kernel_constraint` and
`bias_constraint` to each of its dense sub-layers; our layers that own
projections (attention, feed-forward and the blocks built from them) do the same.
"""

import keras

REGULARIZERS = ("kernel_regularizer", "bias_regularizer", "activity_regularizer")
CONSTRAINTS = ("kernel_constraint", "bias_constraint")


def get_regularizer(name, value):
    """`keras.regularizers.get(value)`, with a `ValueError` naming the argument `name`."""
    return _get(keras.regularizers.get, "regularizer", name, value)


def get_constraint(name, value):
    """`keras.constraints.get(value)`, with a `ValueError` naming the argument `name`."""
    return _get(keras.constraints.get, "constraint", name, value)


def _get(get, kind, name, value):
    try:
        return get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be a Keras {kind} (an object, its name or its config), or None. "
            f"Received: {name}={value!r}. ({error})"
        ) from None


def projection_options(arguments):
    """The five arguments, picked from `arguments` (a layer's `locals()`), as objects.

    Names, configs and objects are accepted as Keras accepts them; `None` stays `None`.
    """
    options = {}
    for name in REGULARIZERS + CONSTRAINTS:
        get = get_regularizer if name in REGULARIZERS else get_constraint
        options[name] = get(name, arguments.get(name))
    return options


def serialize_projection_options(options):
    """`options` as `get_config` writes them (each object as its Keras config)."""
    return {
        name: (
            keras.regularizers.serialize(value)
            if name in REGULARIZERS
            else keras.constraints.serialize(value)
        )
        for name, value in options.items()
    }
