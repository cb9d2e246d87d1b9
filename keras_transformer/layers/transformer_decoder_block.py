import keras

from keras_transformer import sublayer_names as names
from keras_transformer.layers.transformer_block_base import TransformerBlockBase
from keras_transformer.ops.masks import (
    check_mask_shape,
    get_keras_mask,
)
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
    `MultiHeadAttention.compute_cache`) so the encoder keys and values are not
    recomputed each step; the block then returns
    `(outputs, self_attention_cache, cross_attention_cache)`.

    Args:
        num_heads: int, number of attention heads.
        intermediate_dim: int, inner width of the feed-forward network.
        dropout: float, residual dropout on each sub-layer's output.
            Defaults to `0.1`.
        attention_dropout: float, dropout on the attention probabilities.
            Defaults to `0.0`.
        activation_dropout: float, dropout after the feed-forward activation.
            Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        norm_first: bool, pre-norm instead of the paper's post-norm.
            Defaults to `False`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        key_dim: int, size of each attention head. Defaults to
            `width // num_heads`.
        num_key_value_heads: int, key/value heads for grouped-query attention.
            Defaults to `num_heads`.
        cross_attention: bool, whether the block attends to an encoder output.
            Defaults to `True`.
        kernel_initializer: initializer for all kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer for all biases. Defaults to `"zeros"`.
        flash_attention: bool or `None`, see `MultiHeadAttention`.
            Defaults to `None`.
        sliding_window: int, the self-attention's local window (see
            `MultiHeadAttention`); cross-attention always sees the whole
            source. Defaults to `None`.
        kernel_regularizer: regularizer for every attention and feed-forward
            kernel (not the layer norms). Defaults to `None`.
        bias_regularizer: regularizer for those projections' biases.
            Defaults to `None`.
        activity_regularizer: regularizer for each projection's output.
            Defaults to `None`.
        kernel_constraint: constraint for every projection kernel.
            Defaults to `None`.
        bias_constraint: constraint for every projection bias.
            Defaults to `None`.
        position: the model's choice of positions: `"rotary"` or `"alibi"`
            make the self-attention encode them (see `MultiHeadAttention`;
            cross-attention never does); `"sinusoidal"`, `"learned"` and
            `None` leave it position-free (the embeddings add absolute
            positions). Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

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
        `outputs`; then the scores dict if `return_attention_scores`; then the
        two caches if `self_attention_cache` was given.

    Example:

    >>> x = keras.random.normal((2, 5, 16))
    >>> memory = keras.random.normal((2, 7, 16))
    >>> tuple(TransformerDecoderBlock(num_heads=4, intermediate_dim=32)(x, memory).shape)
    (2, 5, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1
    """

    def __init__(self, num_heads, intermediate_dim, *args, cross_attention=True, **kwargs):
        super().__init__(num_heads, intermediate_dim, *args, **kwargs)
        self.has_cross_attention = cross_attention

    def build(self, inputs_shape, encoder_outputs_shape=None):
        self._build_self_attention(inputs_shape)
        if self.has_cross_attention:
            if encoder_outputs_shape is None:
                encoder_outputs_shape = inputs_shape
            self.cross_attention_layer = self._attention(names.CROSS_ATTENTION)
            self.cross_attention_layer.build(inputs_shape, encoder_outputs_shape)
            self.cross_attention_layer_norm = self._layer_norm(
                names.CROSS_ATTENTION_LAYER_NORM, inputs_shape
            )
            self.cross_attention_dropout = self._dropout("cross_attention_dropout")
        self._build_feed_forward(inputs_shape)
        self.built = True

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
        self._check_call_arguments(
            inputs, encoder_outputs, self_attention_cache, cross_attention_cache, cache_update_index
        )
        self_mask = self._self_attention_mask(
            inputs, decoder_padding_mask, decoder_attention_mask, self_attention_cache
        )
        scores = {}

        def self_attention(h):
            return self.self_attention(
                h,
                h,
                attention_mask=self_mask,
                use_causal_mask=use_causal_mask,
                cache=self_attention_cache,
                cache_update_index=cache_update_index,
                return_attention_scores=return_attention_scores,
                training=training,
            )

        x, extras = self._residual(
            inputs,
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            self_attention,
            training,
        )
        if return_attention_scores:
            scores["self_attention"], extras = extras[0], extras[1:]
        if self_attention_cache is not None:
            self_attention_cache = extras[0]
        if self.has_cross_attention:
            x, extras = self._cross_attention_residual(
                x,
                encoder_outputs,
                encoder_padding_mask,
                encoder_attention_mask,
                cross_attention_cache,
                return_attention_scores,
                training,
            )
            if return_attention_scores:
                scores["cross_attention"] = extras[0]

        x = self._feed_forward_residual(x, training)
        results = (x,)
        if return_attention_scores:
            results += (scores,)
        if self_attention_cache is not None:
            results += (self_attention_cache, cross_attention_cache)
        return results[0] if len(results) == 1 else results

    def _check_call_arguments(
        self,
        inputs,
        encoder_outputs,
        self_attention_cache,
        cross_attention_cache,
        cache_update_index,
    ):
        """Raises a `ValueError` naming the argument and the fix for a call that cannot run."""
        check_rank("inputs", inputs.shape, 3, "`(batch, length, width)`")
        if self.has_cross_attention and encoder_outputs is None and cross_attention_cache is None:
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
        if encoder_outputs is not None:
            check_rank("encoder_outputs", encoder_outputs.shape, 3, "`(batch, length, width)`")
        if self_attention_cache is not None and cache_update_index is None:
            raise ValueError("`self_attention_cache` needs `cache_update_index`, the step index.")

    def _self_attention_mask(
        self, inputs, decoder_padding_mask, decoder_attention_mask, self_attention_cache
    ):
        """The self-attention's mask from the padding and attention masks (causality aside)."""
        target_length = inputs.shape[1]
        self_key_length = (
            self_attention_cache.shape[2] if self_attention_cache is not None else target_length
        )
        if decoder_padding_mask is None and self_attention_cache is None:
            decoder_padding_mask = get_keras_mask(inputs)
        check_mask_shape(
            decoder_padding_mask, None, self_key_length, name="decoder_padding_mask", ranks=(2,)
        )
        check_mask_shape(decoder_attention_mask, target_length, self_key_length)
        return self._attention_mask(decoder_padding_mask, decoder_attention_mask)

    def _cross_attention_residual(
        self,
        x,
        encoder_outputs,
        encoder_padding_mask,
        encoder_attention_mask,
        cross_attention_cache,
        return_attention_scores,
        training,
    ):
        """The cross-attention sub-layer with its residual: `(outputs, extras)`."""
        if cross_attention_cache is not None:
            source_length = cross_attention_cache.shape[2]
        else:
            source_length = encoder_outputs.shape[1]
            if encoder_padding_mask is None:
                encoder_padding_mask = get_keras_mask(encoder_outputs)
        check_mask_shape(
            encoder_padding_mask, None, source_length, name="encoder_padding_mask", ranks=(2,)
        )
        check_mask_shape(encoder_attention_mask, x.shape[1], source_length)
        cross_mask = self._attention_mask(encoder_padding_mask, encoder_attention_mask)

        def cross_attention(h):
            return self.cross_attention_layer(
                h,
                encoder_outputs,
                attention_mask=cross_mask,
                cache=cross_attention_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            )

        return self._residual(
            x,
            self.cross_attention_layer_norm,
            self.cross_attention_dropout,
            cross_attention,
            training,
        )

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
            cross = (
                None
                if cross_attention_cache is None
                else keras.KerasTensor(
                    cross_attention_cache.shape, dtype=cross_attention_cache.dtype
                )
            )
            results += (
                keras.KerasTensor(self_attention_cache.shape, dtype=self_attention_cache.dtype),
                cross,
            )
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config["cross_attention"] = self.has_cross_attention
        return config
