"""Layer normalisation over the last axis, with a hand-written gradient."""

import keras
from keras import ops


def layer_normalization(x, gamma, beta, epsilon=1e-6):
    r"""$(x - \mu) / \sqrt{\sigma^2 + \epsilon}\, \gamma + \beta$ over the last axis, in float32.

    $\mu$ and $\sigma^2$ are the mean and variance of `x` over its last axis,
    $\gamma$ = `gamma`, $\beta$ = `beta` and $\epsilon$ = `epsilon`. The
    statistics and the affine map run in float32 whatever `x`'s dtype (bfloat16
    under mixed precision), and the result is cast back to it. The gradient is
    written out (Ba et al., 2016): with $dy$ the output's gradient,

    $$
    \hat{x} = (x - \mu)\, r, \qquad r = \frac{1}{\sqrt{\sigma^2 + \epsilon}}, \qquad
    g = dy\, \gamma,
    $$

    $$
    dx = r \left(g - \operatorname{mean}(g) - \hat{x} \operatorname{mean}(g\, \hat{x})\right),
    \qquad d\gamma = \sum dy\, \hat{x}, \qquad d\beta = \sum dy,
    $$

    the means over the last axis and the sums over the others, reusing the
    forward pass's $\hat{x}$ and $r$, which on TensorFlow's CPU runtime
    is faster than differentiating `keras.ops.layer_normalization`
    automatically.

    Args:
        x: float tensor `(..., features)`.
        gamma: float tensor `(features,)`, the scale.
        beta: float tensor `(features,)`, the offset.
        epsilon: float, added to the variance. Defaults to `1e-6`.

    Returns:
        A tensor of `x`'s shape and dtype.

    Example:

    >>> x = keras.ops.convert_to_tensor([[1.0, 2.0, 3.0, 4.0]])
    >>> y = layer_normalization(x, keras.ops.ones((4,)), keras.ops.zeros((4,)))
    >>> [round(v, 3) for v in keras.ops.convert_to_numpy(y)[0].tolist()]
    [-1.342, -0.447, 0.447, 1.342]
    """

    @ops.custom_gradient
    def normalise(x, gamma, beta):
        features = ops.cast(x, "float32")
        gamma32, beta32 = ops.cast(gamma, "float32"), ops.cast(beta, "float32")
        centred = features - ops.mean(features, axis=-1, keepdims=True)
        inverse_std = ops.rsqrt(ops.mean(ops.square(centred), axis=-1, keepdims=True) + epsilon)
        normalised = centred * inverse_std
        outputs = ops.cast(normalised * gamma32 + beta32, x.dtype)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            with keras.name_scope("layer_norm_gradient"):
                dy = ops.cast(upstream, "float32")
                axes = tuple(range(len(x.shape) - 1))
                d_beta = ops.sum(dy, axis=axes)
                d_gamma = ops.sum(dy * normalised, axis=axes)
                scaled = dy * gamma32
                d_x = inverse_std * (
                    scaled
                    - ops.mean(scaled, axis=-1, keepdims=True)
                    - normalised * ops.mean(scaled * normalised, axis=-1, keepdims=True)
                )
                return (
                    ops.cast(d_x, x.dtype),
                    ops.cast(d_gamma, gamma.dtype),
                    ops.cast(d_beta, beta.dtype),
                )

        return outputs, grad

    # Tensors read from the variables (a cast reads them; `convert_to_tensor` keeps a
    # variable): TensorFlow's custom gradients want the variables they read declared.
    return normalise(x, ops.cast(gamma, gamma.dtype), ops.cast(beta, beta.dtype))
