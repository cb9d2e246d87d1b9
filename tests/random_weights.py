"""Random weights for the tests that compare numbers: every weight differs from its default."""

import numpy as np


def randomize_weights(layer, seed=0, scale=0.3):
    """Gives every weight of `layer` (or model) a random, non-trivial value.

    Biases and layer-norm betas are non-zero and gammas differ from one, so
    a weight copied to the wrong place, or ignored, changes the outputs.

    Args:
        layer: a built Keras layer or model.
        seed: an int, or a `np.random.Generator` to draw from (and advance).
        scale: the standard deviation of the values (around one for gammas).

    Returns:
        `layer`.
    """
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        noise = rng.normal(0.0, scale, size=tuple(variable.shape))
        if variable.path.endswith("gamma"):
            noise = 1.0 + noise
        variable.assign(noise.astype(variable.dtype))
    return layer
