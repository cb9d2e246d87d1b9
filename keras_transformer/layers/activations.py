"""Activations that Keras has no string name for, registered so that models using them save."""

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
def gelu_approximate(x):
    r"""GELU with the tanh approximation, BERT's feed-forward activation.

    $$
    \operatorname{GELU}(x) \approx \tfrac{1}{2}\, x \left(1 + \tanh\left(\sqrt{2/\pi}
        \left(x + 0.044715\, x^3\right)\right)\right),
    $$

    i.e. `keras.activations.gelu(x, approximate=True)`. Keras' string `"gelu"` is
    the exact (erf) form; the two differ by up to about 5e-4, enough to break
    parity with a BERT checkpoint. The function is registered under the
    package `keras_transformer`, so a layer or model built with
    `activation=gelu_approximate` serialises it in `get_config` and loads from
    `.keras` without `custom_objects`.

    Args:
        x: float tensor.

    Returns:
        A tensor of the same shape and dtype as `x`.

    Example:

    >>> x = keras.ops.convert_to_tensor([-1.0, 0.0, 1.0])
    >>> [round(float(v), 4) for v in keras.ops.convert_to_numpy(gelu_approximate(x))]
    [-0.1588, 0.0, 0.8412]

    References:
        - [Hendrycks & Gimpel, 2016](https://arxiv.org/abs/1606.08415),
          "Gaussian Error Linear Units (GELUs)", section 2.
        - [Devlin et al., 2019](https://arxiv.org/abs/1810.04805), "BERT",
          section 3 (GELU in the feed-forward network).
    """
    return keras.activations.gelu(x, approximate=True)
