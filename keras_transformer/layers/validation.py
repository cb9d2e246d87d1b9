"""Argument checks shared by the layers; each error names the argument and the fix."""


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")


def check_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}.")


def check_rank(name, shape, rank, layout):
    if len(shape) != rank:
        raise ValueError(
            f"`{name}` must have rank {rank}, {layout}. Received: {name}.shape={tuple(shape)}."
        )


def check_one_of(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}. Received: {name}={value!r}."
        )
