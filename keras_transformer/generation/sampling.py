"""Next-token choice for one-hypothesis-per-row decoding: argmax, top-k and top-p sampling."""

import keras
from keras import ops

from keras_transformer.ops.backend_paths import stateless_seed_dtype

_NEG_INF = float("-inf")


class _StepSeed(keras.random.SeedGenerator):
    """A seed tensor handed to `keras.random` ops as if it were a `SeedGenerator`.

    `keras.random` takes an int or a `SeedGenerator`; an int is a trace-time constant
    and a real generator is a variable that a jitted JAX function cannot update. The
    decoding loop instead derives a fresh seed tensor from the loop index, so every
    step draws different numbers and the same `seed` reproduces the same samples.
    """

    def __init__(self, seed):  # no super().__init__(): that would create a state variable
        self._seed = seed

    def next(self, ordered=True):
        return self._seed


def step_seed(seed, index):
    """The seed of decoding step `index`, from the `(2,)` int32 base `seed`."""
    seed = ops.cast(seed, "int32")
    offset = ops.stack([ops.zeros((), "int32"), ops.cast(index, "int32")])
    return _StepSeed(ops.cast(seed + offset, stateless_seed_dtype()))


def greedy_choice(logits):
    """The most likely token of each row of `(rows, vocabulary)` logits, as int32."""
    return ops.cast(ops.argmax(logits, axis=-1), "int32")


def top_k_logits(logits, k):
    """Keeps the `k` largest logits of each row and sets the others to `-inf`.

    Tokens tied with the k-th largest logit are kept too.

    Args:
        logits: float tensor `(rows, vocabulary)`.
        k: int, how many tokens to keep per row.

    Returns:
        The filtered logits, same shape.

    Example:

    >>> from keras_transformer.generation import top_k_logits
    >>> logits = keras.ops.convert_to_tensor([[1.0, 3.0, 2.0], [4.0, 4.0, 0.0]])
    >>> keras.ops.convert_to_numpy(top_k_logits(logits, 2)).tolist()
    [[-inf, 3.0, 2.0], [4.0, 4.0, -inf]]

    References:
        - [Fan et al., 2018](https://arxiv.org/abs/1805.04833)
    """
    kth = ops.top_k(logits, k, sorted=True)[0][:, -1:]
    return ops.where(ops.less(logits, kth), _NEG_INF, logits)


def top_p_logits(logits, p):
    """Keeps the smallest set of most likely tokens whose probability reaches `p`.

    Nucleus filtering: the most likely token is always kept, then tokens in
    order of probability while the probability of the tokens before them is
    below `p`; the others get `-inf`.

    Args:
        logits: float tensor `(rows, vocabulary)`.
        p: float or scalar tensor in `(0, 1]`.

    Returns:
        The filtered logits, same shape.

    Example:

    >>> from keras_transformer.generation import top_p_logits
    >>> logits = keras.ops.log(keras.ops.convert_to_tensor([[0.5, 0.3, 0.2]]))
    >>> filtered = keras.ops.convert_to_numpy(top_p_logits(logits, 0.7))
    >>> [round(value, 2) for value in filtered[0].tolist()]  # 0.5 < 0.7 <= 0.5 + 0.3
    [-0.69, -1.2, -inf]

    References:
        - [Holtzman et al., 2020](https://arxiv.org/abs/1904.09751)
    """
    vocabulary_size = logits.shape[-1]
    sorted_logits = ops.top_k(logits, vocabulary_size, sorted=True)[0]
    probabilities = ops.softmax(sorted_logits, axis=-1)
    before = ops.cumsum(probabilities, axis=-1) - probabilities
    kept = before < ops.cast(p, "float32")
    threshold = ops.min(ops.where(kept, sorted_logits, float("inf")), axis=-1, keepdims=True)
    return ops.where(ops.less(logits, threshold), _NEG_INF, logits)


def sample_choice(logits, seed, index, temperature=1.0, top_k=None, top_p=None):
    """Draws one token per row from the filtered, temperature-scaled logits.

    Args:
        logits: float32 tensor `(rows, vocabulary)`.
        seed: int32 tensor `(2,)`, the base seed of the generation.
        index: scalar int tensor, the decoding step (varies the draw per step).
        temperature: float or scalar tensor, divides the logits. Defaults to `1.0`.
        top_k: int, sample among the `top_k` most likely tokens. Defaults to
            `None` (no top-k filter).
        top_p: float or scalar tensor, nucleus sampling threshold. Defaults to
            `None` (no nucleus filter).

    Returns:
        int32 tensor `(rows,)`.
    """
    logits = logits / ops.cast(temperature, "float32")
    if top_k is not None:
        logits = top_k_logits(logits, top_k)
    if top_p is not None:
        logits = top_p_logits(logits, top_p)
    drawn = keras.random.categorical(logits, 1, dtype="int32", seed=step_seed(seed, index))
    return drawn[:, 0]
