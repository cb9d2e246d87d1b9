import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that sibling weights do not share one instance.

    An unseeded Keras initializer draws its seed when it is created, so one
    instance returns the same values at every call: shared by the query, key and
    value projections it would make their kernels identical. Each copy draws a
    seed of its own. A seeded initializer keeps its seed in the copy, so sibling
    kernels of one shape come out equal, as in `keras.layers.MultiHeadAttention`:
    pass `seed=None` for different ones.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
