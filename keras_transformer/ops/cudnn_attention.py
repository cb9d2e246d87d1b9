"""JAX's fused attention with padding as sequence lengths and causality as its flag.

`keras.ops.dot_product_attention` can hand JAX only a mask, and JAX's cuDNN kernel takes a
mask only as a `(..., queries, keys)` bias: a padding mask `(batch, 1, 1, keys)` is refused,
and Keras then runs XLA's attention, which forms every logit. Called here with the lengths
of right-padded rows and `is_causal`, the kernel skips the padded and future keys instead.
"""

import jax
import jax.numpy as jnp


def _right_padded(valid):
    """Whether every row of the `(batch, length)` mask is its tokens first, then padding."""
    return jnp.all(valid[:, 1:] <= valid[:, :-1])


def padded_attention(
    query,
    key,
    value,
    *,
    scale,
    causal=False,
    query_padding=None,
    key_padding=None,
    implementation="cudnn",
):
    """Attention over padded rows and causal positions, on JAX's fused kernel.

    Equal to the explicit attention with the mask `query_padding[t] and
    key_padding[s] and (s <= t if causal)`, a query row that sees no key giving
    zeros. Right-padded key rows reach the kernel as sequence lengths; other
    padding (left or scattered), checked on the device, as a `(batch, 1, T, S)`
    mask, the shape the kernel takes, so that any padding is exact.

    Args:
        query: `(batch, T, heads, head_dim)`, bfloat16 or float16 for cuDNN.
        key, value: `(batch, S, kv_heads, head_dim)`; `kv_heads` divides `heads`.
        scale: float, the logit scale.
        causal: bool, query `t` attends keys `s <= t` (`T <= S`: a prefill's
            queries start at key 0).
        query_padding: boolean `(batch, T)`, `False` at padded queries, or `None`.
        key_padding: boolean `(batch, S)`, `False` at padded keys, or `None`.
        implementation: `"cudnn"`, or `"xla"`, which takes the same arguments and
            runs anywhere (the tests compare the two paths on the CPU).

    Returns:
        The attended values, `(batch, T, heads, head_dim)`.
    """
    batch, query_length = query.shape[:2]

    def attention(**padding):
        return jax.nn.dot_product_attention(
            query, key, value, scale=scale, is_causal=causal, implementation=implementation,
            **padding,
        )  # fmt: skip

    if key_padding is None:
        outputs, row_valid = attention(), None
    else:
        key_padding = key_padding.astype(bool)
        lengths = jnp.sum(key_padding, axis=-1, dtype="int32")
        any_padding = jnp.broadcast_to(
            key_padding[:, None, None, :], (batch, 1, query_length, key_padding.shape[1])
        )
        outputs = jax.lax.cond(
            _right_padded(key_padding),
            lambda: attention(key_value_seq_lengths=lengths),
            lambda: attention(mask=any_padding),
        )
        # A query row that sees no key gets zeros, as on the explicit path.
        if causal:
            row_valid = jnp.cumsum(key_padding, axis=-1)[:, :query_length] > 0
        else:
            row_valid = jnp.broadcast_to(lengths[:, None] > 0, (batch, query_length))
    if query_padding is not None:
        query_padding = query_padding.astype(bool)
        row_valid = query_padding if row_valid is None else row_valid & query_padding
    if row_valid is not None:
        # `where`, not a product: the kernel may leave NaN in a row with no key.
        outputs = jnp.where(row_valid[:, :, None, None], outputs, jnp.zeros((), outputs.dtype))
    return outputs
