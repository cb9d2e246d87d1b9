"""Argument checks shared by the whole package; each error names the argument and the fix.

Python's `bool` is an `int`, so `True` would pass as `1`; every check refuses it.
NumPy scalars are accepted as the Python numbers they hold.
"""

import numbers


def is_int(value):
    """Whether `value` is an integer (Python or NumPy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value):
    """Whether `value` is a real number (int or float, Python or NumPy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive_int(name, value, allow_none=False):
    """Raises `ValueError` unless `value` is an int `>= 1`; returns it as a Python int."""
    if value is None and allow_none:
        return None
    if not is_int(value) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")
    return int(value)


def check_bool(name, value, meaning=""):
    """Raises `ValueError` unless `value` is `True` or `False`; `meaning` may say what each does."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False{meaning}. Received: {name}={value!r}.")


def check_rate(name, value):
    """Raises `ValueError` unless `value` is a number in `[0, 1)`."""
    if not is_real(value) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}.")


def check_rank(name, shape, rank, layout):
    """Raises `ValueError` unless `shape` has `rank` axes, described by `layout`."""
    if len(shape) != rank:
        raise ValueError(
            f"`{name}` must have rank {rank}, {layout}. Received: {name}.shape={tuple(shape)}."
        )


def check_one_of(name, value, choices):
    """Raises `ValueError` unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}. Received: {name}={value!r}."
        )
