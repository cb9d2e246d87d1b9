import keras

from keras_transformer.layers.transformer_block_base import TransformerBlockBase
from keras_transformer.validation import check_rank


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoderBlock(TransformerBlockBase):
    """One decoder layer of the paper: masked self-attention, cross-attention, feed-forward.

    The self-attention is causal by default, so position `t` never sees
    positions after `t`. The cross-attention attends over the encoder output.
    With `cross_attention=False` the block is decoder-only (GPT-style):
    self-attention and feed-forward.

    For incremental decoding pass `self_attention_cache`
    `(batch, 2, max_length, num_key_value_heads, key_dim)` with
    `cache_update_index`, and optionally `cross_attention_cache` (see
    [`MultiHeadAttention.compute_cache`][keras_transformer.layers.MultiHeadAttention.compute_cache])
    so the encoder keys and values are not recomputed each step; the block then
    returns `(outputs, self_attention_cache)`, the cross-attention cache being
    read only.

    Args:
        num_heads: int, number of attention heads.
        intermediate_dim: int, inner width of the feed-forward network.
        cross_attention: bool, whether the block attends to an encoder output.
            Defaults to `True`.
        **kwargs: the other arguments of
            [`TransformerEncoderBlock`][keras_transformer.layers.TransformerEncoderBlock] (the
            dropouts, `activation`, `norm_first`, `layer_norm_epsilon`,
            `key_dim`, `num_key_value_heads`, initializers, `flash_attention`,
            regularizers and constraints; `sliding_window` and
            `relative_position`, which reach the self-attention only) and base
            layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, target_length, width)`.
        encoder_outputs: tensor `(batch, source_length, width)`; required when
            `cross_attention=True` unless `cross_attention_cache` is given.
        decoder_padding_mask: boolean `(batch, target_length)` (or
            `(batch, max_length)` with a cache). Defaults to the Keras mask of
            `inputs`.
        encoder_padding_mask: boolean `(batch, source_length)`. Defaults to
            the Keras mask of `encoder_outputs`.
        use_causal_mask: bool. Defaults to `True`.
        self_attention_cache: see above.
        cross_attention_cache: see above.
        cache_update_index: int or scalar tensor, the decoding step.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return a dict of attention
            probabilities with keys `"self_attention"` and `"cross_attention"`.
        decoder_attention_mask: boolean `(batch, target_length, target_length)`.
        encoder_attention_mask: boolean `(batch, target_length, source_length)`.

    Returns:
        `outputs`; with `return_attention_scores`, `(outputs, scores)`, the
        scores a dict; with a `self_attention_cache`, the updated cache last:
        `(outputs, cache)` or `(outputs, scores, cache)`.

    Example:

    >>> x = keras.random.normal((2, 5, 16))
    >>> memory = keras.random.normal((2, 7, 16))
    >>> tuple(TransformerDecoderBlock(num_heads=4, intermediate_dim=32)(x, memory).shape)
    (2, 5, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1
    """

    def __init__(self, num_heads, intermediate_dim, *args, cross_attention=True, **kwargs):
        self.has_cross_attention = cross_attention
        super().__init__(num_heads, intermediate_dim, *args, **kwargs)

    def call(
        self,
        inputs,
        encoder_outputs=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
        decoder_attention_mask=None,
        encoder_attention_mask=None,
    ):
        self._check_call(
            encoder_outputs, self_attention_cache, cross_attention_cache, cache_update_index
        )
        scores = {}

        # Masked self-attention (causal; with a cache, over the cached steps too).
        # Post-norm `LN(x + Dropout(Attention(x)))`, pre-norm `x + Dropout(Attention(LN(x)))`.
        x = inputs
        h = self.self_attention_layer_norm(x) if self.norm_first else x
        h = self.self_attention(
            h,
            h,
            attention_mask=decoder_attention_mask,
            key_mask=decoder_padding_mask,
            use_causal_mask=use_causal_mask,
            cache=self_attention_cache,
            cache_update_index=cache_update_index,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        if self_attention_cache is not None and return_attention_scores:
            h, scores["self_attention"], self_attention_cache = h
        elif self_attention_cache is not None:
            h, self_attention_cache = h
        elif return_attention_scores:
            h, scores["self_attention"] = h
        x = x + self.self_attention_dropout(h, training=training)
        if not self.norm_first:
            x = self.self_attention_layer_norm(x)

        # Cross-attention over the encoder output (or its precomputed keys and values).
        if self.has_cross_attention:
            h = self.cross_attention_layer_norm(x) if self.norm_first else x
            h = self.cross_attention_layer(
                h,
                encoder_outputs,
                attention_mask=encoder_attention_mask,
                key_mask=encoder_padding_mask,
                cache=cross_attention_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if return_attention_scores:
                h, scores["cross_attention"] = h
            x = x + self.cross_attention_dropout(h, training=training)
            if not self.norm_first:
                x = self.cross_attention_layer_norm(x)

        # Feed-forward sub-layer.
        h = self.feed_forward_layer_norm(x) if self.norm_first else x
        h = self.feed_forward(h, training=training)
        x = x + self.feed_forward_dropout(h, training=training)
        if not self.norm_first:
            x = self.feed_forward_layer_norm(x)

        results = (x, scores) if return_attention_scores else (x,)
        if self_attention_cache is not None:
            results += (self_attention_cache,)
        return results[0] if len(results) == 1 else results

    def _check_call(self, encoder_outputs, self_cache, cross_cache, cache_update_index):
        """Raises a `ValueError` naming the argument and the fix for a call that cannot run."""
        if self.has_cross_attention and encoder_outputs is None and cross_cache is None:
            raise ValueError(
                "This block has `cross_attention=True`, so it needs `encoder_outputs` "
                "(or a precomputed `cross_attention_cache`). Pass them, or build the block "
                "with `cross_attention=False` for a decoder-only model."
            )
        if not self.has_cross_attention and encoder_outputs is not None:
            raise ValueError(
                "`encoder_outputs` was passed to a block built with `cross_attention=False`. "
                "Build it with `cross_attention=True` to attend to an encoder."
            )
        if self_cache is not None and cache_update_index is None:
            raise ValueError("`self_attention_cache` needs `cache_update_index`, the step index.")
        if encoder_outputs is not None:
            check_rank("encoder_outputs", encoder_outputs.shape, 3, "`(batch, length, width)`")

    def compute_output_spec(
        self,
        inputs,
        encoder_outputs=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        **kwargs,
    ):
        results = (keras.KerasTensor(inputs.shape, dtype=self.compute_dtype),)
        if return_attention_scores:
            batch, length = inputs.shape[0], inputs.shape[1]
            key_length = (
                self_attention_cache.shape[2] if self_attention_cache is not None else length
            )
            scores = {
                "self_attention": keras.KerasTensor(
                    (batch, self.num_heads, length, key_length), dtype=self.compute_dtype
                )
            }
            if self.has_cross_attention:
                source = (
                    cross_attention_cache.shape[2]
                    if cross_attention_cache is not None
                    else encoder_outputs.shape[1]
                )
                scores["cross_attention"] = keras.KerasTensor(
                    (batch, self.num_heads, length, source), dtype=self.compute_dtype
                )
            results += (scores,)
        if self_attention_cache is not None:
            cache = self_attention_cache
            results += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config["cross_attention"] = self.has_cross_attention
        return config
