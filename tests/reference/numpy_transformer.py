"""A small float64 NumPy Transformer, written from "Attention Is All You Need" (2017).

It is the reference the layers are checked against, so it favours the paper's
notation over speed: heads are a Python loop, masks are plain boolean arrays
(`True` = may attend) and every function takes its weights explicitly.

Shapes: `x` is `(batch, length, d_model)`; an attention mask is boolean and
broadcasts to `(batch, target_length, source_length)`.
"""

import math
from dataclasses import dataclass

import numpy as np


def softmax(logits, axis=-1):
    shifted = logits - np.max(logits, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)


def attention(q, k, v, mask=None):
    """Scaled dot-product attention, `softmax(Q Kᵀ / √d_k) V` (eq. 1).

    `q` is `(..., T, d_k)`, `k` is `(..., S, d_k)`, `v` is `(..., S, d_v)`, `mask`
    broadcasts to `(..., T, S)`. A query whose keys are all masked gets zeros.
    Returns `(outputs, probabilities)`.
    """
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is None:
        return softmax(logits) @ v, softmax(logits)
    mask = np.broadcast_to(np.asarray(mask, bool), logits.shape)
    logits = np.where(mask, logits, -np.inf)
    any_key = mask.any(axis=-1, keepdims=True)
    logits = np.where(any_key, logits, 0.0)  # keeps fully masked rows finite
    probs = np.where(mask, softmax(logits), 0.0)
    return probs @ v, probs


def causal_mask(length, key_length=None, start=0):
    """`(T, S)` mask: the query at position `start + t` sees keys `0 .. start + t`."""
    key_length = length if key_length is None else key_length
    return np.arange(key_length)[None, :] <= start + np.arange(length)[:, None]


def padding_mask_to_attention(padding_mask):
    """`(batch, S)` padding mask (`True` = real token) → `(batch, 1, S)` key mask."""
    return np.asarray(padding_mask, bool)[:, None, :]


@dataclass
class AttentionWeights:
    """Per-head projections of section 3.2.2, stacked on the first axis.

    `wq[i]` is `W_i^Q` of shape `(d_model, d_k)` and `bq[i]` its bias; `wk`, `bk`,
    `wv`, `bv` likewise, possibly with fewer (key/value) heads than `wq`.
    `wo` is `W^O` of shape `(heads * d_v, d_model)`, `bo` its bias.
    """

    wq: np.ndarray
    bq: np.ndarray
    wk: np.ndarray
    bk: np.ndarray
    wv: np.ndarray
    bv: np.ndarray
    wo: np.ndarray
    bo: np.ndarray


def multi_head_attention(query, value, w, key=None, mask=None):
    """`MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O` (section 3.2.2).

    `head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)`. With fewer key/value heads
    than query heads (grouped-query attention), query head `i` uses key/value
    head `i // (heads / kv_heads)`.
    """
    key = value if key is None else key
    num_heads, num_kv_heads = len(w.wq), len(w.wk)
    group = num_heads // num_kv_heads
    heads = []
    for i in range(num_heads):
        j = i // group
        q = query @ w.wq[i] + w.bq[i]
        k = key @ w.wk[j] + w.bk[j]
        v = value @ w.wv[j] + w.bv[j]
        heads.append(attention(q, k, v, mask)[0])
    return np.concatenate(heads, axis=-1) @ w.wo + w.bo


def sinusoidal_position_encoding(length, d_model, max_wavelength=10000.0, start=0):
    """`PE[pos, 2i] = sin(pos / 10000^(2i/d))`, `PE[pos, 2i+1] = cos(pos / 10000^(2i/d))`."""
    pos = np.arange(start, start + length, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angles = pos / max_wavelength ** (two_i / d_model)
    table = np.zeros((length, d_model))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + epsilon) + beta


def relu(x):
    return np.maximum(0.0, x)


def gelu(x):
    """`x Φ(x)` with the exact normal CDF (Hendrycks & Gimpel, 2016)."""
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """BERT's and GPT-2's tanh approximation of GELU."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def silu(x):
    """`x σ(x)`, also called swish."""
    return x / (1.0 + np.exp(-x))


# Keras activation names (and the library's `gelu_approximate`) → the formulas above.
ACTIVATIONS = {
    "relu": relu,
    "gelu": gelu,
    "gelu_approximate": gelu_tanh,
    "silu": silu,
    "tanh": np.tanh,
    "linear": lambda x: x,
}


def feed_forward(x, w1, b1, w2, b2, activation=relu):
    """`FFN(x) = max(0, x W1 + b1) W2 + b2` (eq. 2), or another activation than ReLU."""
    return activation(x @ w1 + b1) @ w2 + b2


@dataclass
class FeedForwardWeights:
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray


@dataclass
class LayerNormWeights:
    gamma: np.ndarray
    beta: np.ndarray


def _sublayer(x, sublayer, norm, epsilon, norm_first):
    """Post-norm `LN(x + F(x))` (the paper, section 5.4) or pre-norm `x + F(LN(x))`."""
    if norm_first:
        return x + sublayer(layer_norm(x, norm.gamma, norm.beta, epsilon))
    return layer_norm(x + sublayer(x), norm.gamma, norm.beta, epsilon)


def _ffn(ffn, activation=relu):
    return lambda h: feed_forward(h, ffn.w1, ffn.b1, ffn.w2, ffn.b2, activation)


def encoder_block(
    x, attn, attn_norm, ffn, ffn_norm, epsilon, mask=None, norm_first=False, activation=relu
):
    """One encoder layer: self-attention then FFN, each with residual and layer norm."""
    x = _sublayer(
        x, lambda h: multi_head_attention(h, h, attn, mask=mask), attn_norm, epsilon, norm_first
    )
    return _sublayer(x, _ffn(ffn, activation), ffn_norm, epsilon, norm_first)


def decoder_block(
    x,
    memory,
    self_attn,
    self_norm,
    cross_attn,
    cross_norm,
    ffn,
    ffn_norm,
    epsilon,
    self_mask=None,
    memory_mask=None,
    norm_first=False,
    activation=relu,
):
    """One decoder layer: causal self-attention, attention over `memory`, FFN.

    `self_mask` (e.g. decoder padding) is combined with the causal mask;
    `memory_mask` masks encoder positions.
    """
    causal = causal_mask(x.shape[1])[None]
    self_mask = causal if self_mask is None else np.logical_and(causal, self_mask)
    x = _sublayer(
        x,
        lambda h: multi_head_attention(h, h, self_attn, mask=self_mask),
        self_norm,
        epsilon,
        norm_first,
    )
    x = _sublayer(
        x,
        lambda h: multi_head_attention(h, memory, cross_attn, mask=memory_mask),
        cross_norm,
        epsilon,
        norm_first,
    )
    return _sublayer(x, _ffn(ffn, activation), ffn_norm, epsilon, norm_first)
