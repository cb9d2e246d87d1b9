import keras
from keras import ops

from keras_transformer.ops.attention import scaled_dot_product_attention
from keras_transformer.ops.masks import merge_masks
from keras_transformer.validation import check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaledDotProductAttention(keras.layers.Layer):
    r"""Scaled dot-product attention as a layer, $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$.

    The layer form of [`keras_transformer.ops.scaled_dot_product_attention`][]:
    no weights, only the attention. Inputs of rank 4 are `(batch, length, heads,
    head_dim)`; inputs of rank 3 `(batch, length, features)` are treated as a
    single head.

    Args:
        dropout: float, dropout rate on the attention probabilities.
            Defaults to `0.0`.
        scale: float, the logit scale. Defaults to `1 / sqrt(head_dim)`.
        flash_attention: bool or `None`, passed to
            `keras.ops.dot_product_attention`. Defaults to `None`.
        seed: int, seed for the dropout. Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, target_length, [heads,] head_dim)`.
        key: tensor `(batch, source_length, [kv_heads,] head_dim)`.
        value: tensor `(batch, source_length, [kv_heads,] value_dim)`.
            Defaults to `key`.
        attention_mask: boolean tensor broadcastable to
            `(batch, [heads,] target_length, source_length)`.
        use_causal_mask: bool, whether query `i` only attends to keys `<= i`.
        return_attention_scores: bool, also return the probabilities.
        training: bool, whether dropout is active.
        query_mask, key_mask, value_mask: Keras masks `(batch, length)`,
            filled by Keras from the inputs.

    Example:

    >>> q = keras.random.normal((2, 4, 3, 8))
    >>> tuple(ScaledDotProductAttention()(q, q, q).shape)
    (2, 4, 3, 8)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.2.1
    """

    def __init__(self, dropout=0.0, scale=None, flash_attention=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_rate("dropout", dropout)
        if scale is not None and not isinstance(scale, (int, float)):
            raise ValueError(f"`scale` must be a float or None. Received: scale={scale!r}.")
        self.dropout = dropout
        self.scale = scale
        self.flash_attention = flash_attention
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True
        self.built = True

    def call(
        self,
        query,
        key,
        value=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        key_mask=None,
        value_mask=None,
    ):
        if value is None:
            value = key
        single_head = len(query.shape) == 3
        if single_head:
            query, key, value = (ops.expand_dims(t, 2) for t in (query, key, value))
        if attention_mask is not None and single_head and len(attention_mask.shape) == 3:
            attention_mask = ops.expand_dims(attention_mask, 1)
        mask = merge_masks(
            None if query_mask is None else query_mask[:, None, :, None],
            None if key_mask is None else key_mask[:, None, None, :],
            None if value_mask is None else value_mask[:, None, None, :],
        )
        if attention_mask is not None:
            attention_mask = ops.convert_to_tensor(attention_mask)
        if mask is not None and attention_mask is not None and len(attention_mask.shape) < 4:
            attention_mask = ops.reshape(
                attention_mask,
                (1,) * (4 - len(attention_mask.shape)) + tuple(ops.shape(attention_mask)),
            )
        result = scaled_dot_product_attention(
            query,
            key,
            value,
            mask=merge_masks(mask, attention_mask),
            is_causal=use_causal_mask,
            dropout=self.dropout,
            return_attention_scores=return_attention_scores,
            training=training,
            scale=self.scale,
            seed=self.seed_generator,
            flash_attention=self.flash_attention,
        )
        if single_head:
            if return_attention_scores:
                return ops.squeeze(result[0], 2), ops.squeeze(result[1], 1)
            return ops.squeeze(result, 2)
        return result

    def compute_output_shape(self, query_shape, key_shape, value_shape=None):
        value_shape = key_shape if value_shape is None else value_shape
        return tuple(query_shape[:-1]) + (value_shape[-1],)

    def compute_output_spec(self, query, key, value=None, return_attention_scores=False, **kwargs):
        value = key if value is None else value
        outputs = keras.KerasTensor(
            self.compute_output_shape(query.shape, key.shape, value.shape), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return outputs
        if len(query.shape) == 3:
            scores_shape = (query.shape[0], query.shape[1], key.shape[1])
        else:
            scores_shape = (query.shape[0], query.shape[2], query.shape[1], key.shape[1])
        return outputs, keras.KerasTensor(scores_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "dropout": self.dropout,
                "scale": self.scale,
                "flash_attention": self.flash_attention,
                "seed": self.seed,
            }
        )
        return config
