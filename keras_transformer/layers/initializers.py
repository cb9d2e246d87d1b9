import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that sibling weights do not share one instance.

    A seeded initializer instance produces the same values on every call, which
    would make, say, the query, key and value kernels identical.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
