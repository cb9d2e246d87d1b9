import keras
from keras import ops

from keras_transformer.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_transformer.layers.transformer_stack_base import TransformerStackBase
from keras_transformer.ops.masks import get_keras_mask
from keras_transformer.validation import check_rank


def _block_cache(cache, index):
    return None if cache is None else cache[index]


def _check_per_block(name, cache, num_layers):
    """Raises a `ValueError` naming the per-block form unless `cache` is in it."""
    if cache is None:
        return
    if not isinstance(cache, (list, tuple)):
        raise ValueError(
            f"`{name}` must be a tuple of the blocks' caches, one `(batch, 2, max_length, "
            "num_key_value_heads, key_dim)` tensor per block, as "
            "`initial_self_attention_cache` and `compute_cross_attention_cache` return. "
            f"Received a single tensor of shape {tuple(cache.shape)}; a cache stacked on "
            "axis 1 converts with `tuple(keras.ops.unstack(cache, axis=1))`."
        )
    if len(cache) != num_layers:
        raise ValueError(
            f"`{name}` must hold one cache per block ({num_layers}). Received {len(cache)}."
        )


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoder(TransformerStackBase):
    """The paper's decoder: a stack of `num_layers` `TransformerDecoderBlock`s.

    With `norm_first=True` (pre-norm) a final layer normalization is applied
    to the output of the last block. For incremental decoding each cache is
    a tuple with one tensor per block, `(batch, 2, max_length,
    num_key_value_heads, key_dim)`: build the cross-attention cache once with
    `compute_cross_attention_cache` and an empty self-attention cache with
    `initial_self_attention_cache`. Each block's cache is its own buffer,
    which a compiled decoding loop writes in place one step at a time.

    Args:
        num_layers: int, number of blocks (6 in the paper).
        num_heads: int, number of attention heads.
        intermediate_dim: int, inner width of the feed-forward networks.
        rematerialize: bool, activation checkpointing as in
            [`TransformerEncoder`][keras_transformer.layers.TransformerEncoder]:
            each block's activations are recomputed in the backward pass of
            training calls that use no cache and return no attention scores.
            Defaults to `False`.
        cross_attention: bool, whether the blocks attend to an encoder output.
            Defaults to `True`.
        **kwargs: every other
            [`TransformerEncoderBlock`][keras_transformer.layers.TransformerEncoderBlock] argument
            (including `relative_position`) and the base layer arguments.

    Call arguments:
        Those of
        [`TransformerDecoderBlock`][keras_transformer.layers.TransformerDecoderBlock], with a tuple
        of the blocks' caches for each cache. Returns `outputs`; with
        `return_attention_scores`, `(outputs, scores)`, the scores a list of
        each block's dicts; with a `self_attention_cache`, the updated tuple of
        caches last: `(outputs, cache)` or `(outputs, scores, cache)`.

    Example:

    >>> x = keras.random.normal((2, 5, 16))
    >>> memory = keras.random.normal((2, 7, 16))
    >>> decoder = TransformerDecoder(num_layers=2, num_heads=4, intermediate_dim=32)
    >>> tuple(decoder(x, memory).shape)
    (2, 5, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1
    """

    block_class = TransformerDecoderBlock

    def __init__(self, num_layers, num_heads, intermediate_dim, cross_attention=True, **kwargs):
        super().__init__(
            num_layers, num_heads, intermediate_dim, cross_attention=cross_attention, **kwargs
        )

    def _block_specific_arguments(self, kwargs):
        return {"cross_attention": kwargs.pop("cross_attention")}

    def build(self, inputs_shape, encoder_outputs_shape=None):
        check_rank("inputs", inputs_shape, 3, "`(batch, length, width)`")
        super().build(inputs_shape, encoder_outputs_shape)

    def initial_self_attention_cache(self, batch_size, max_length, dtype=None):
        """A tuple of zeros `(batch, 2, max_length, kv_heads, key_dim)`, one per block."""
        dtype = dtype or self.compute_dtype
        return tuple(
            ops.zeros(block.self_attention.cache_shape(batch_size, max_length), dtype=dtype)
            for block in self.blocks
        )

    def compute_cross_attention_cache(self, encoder_outputs):
        """A tuple of the keys and values of `encoder_outputs`, one per block, computed once."""
        return tuple(
            block.cross_attention_layer.compute_cache(encoder_outputs) for block in self.blocks
        )

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
        if self_attention_cache is None and decoder_padding_mask is None:
            # Read once: a rematerialized block gets its inputs without their Keras masks.
            decoder_padding_mask = get_keras_mask(inputs)
        if cross_attention_cache is None and encoder_padding_mask is None:
            encoder_padding_mask = get_keras_mask(encoder_outputs)
        _check_per_block("self_attention_cache", self_attention_cache, self.num_layers)
        _check_per_block("cross_attention_cache", cross_attention_cache, self.num_layers)
        tensors = {
            "encoder_outputs": encoder_outputs,
            "decoder_padding_mask": decoder_padding_mask,
            "encoder_padding_mask": encoder_padding_mask,
            "decoder_attention_mask": decoder_attention_mask,
            "encoder_attention_mask": encoder_attention_mask,
        }
        # Only training calls keep activations for a backward pass to recompute.
        remat = (
            self.rematerialize
            and training is True
            and not return_attention_scores
            and self_attention_cache is None
        )
        x, all_scores, new_caches = inputs, [], []
        for i, block in enumerate(self.blocks):
            if remat:
                outputs = self._rematerialized_block(
                    block, x, tensors, use_causal_mask=use_causal_mask, training=training
                )
            else:
                outputs = block(
                    x,
                    **tensors,
                    use_causal_mask=use_causal_mask,
                    self_attention_cache=_block_cache(self_attention_cache, i),
                    cross_attention_cache=_block_cache(cross_attention_cache, i),
                    cache_update_index=cache_update_index,
                    training=training,
                    return_attention_scores=return_attention_scores,
                )
            if self_attention_cache is not None and return_attention_scores:
                x, scores, cache = outputs
            elif self_attention_cache is not None:
                x, cache = outputs
            elif return_attention_scores:
                x, scores = outputs
            else:
                x = outputs
            if return_attention_scores:
                all_scores.append(scores)
            if self_attention_cache is not None:
                new_caches.append(cache)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)

        results = (x, all_scores) if return_attention_scores else (x,)
        if self_attention_cache is not None:
            results += (type(self_attention_cache)(new_caches),)
        return results[0] if len(results) == 1 else results

    def compute_output_spec(
        self,
        inputs,
        encoder_outputs=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        **kwargs,
    ):
        block_spec = TransformerDecoderBlock.compute_output_spec(
            self.blocks[0],
            inputs,
            encoder_outputs,
            self_attention_cache=_block_cache(self_attention_cache, 0),
            cross_attention_cache=_block_cache(cross_attention_cache, 0),
            return_attention_scores=return_attention_scores,
        )
        if not isinstance(block_spec, tuple):
            return block_spec
        results = (block_spec[0],)
        if return_attention_scores:
            results += ([block_spec[1]] * self.num_layers,)
        if self_attention_cache is not None:
            results += (
                keras.tree.map_structure(
                    lambda cache: keras.KerasTensor(cache.shape, dtype=cache.dtype),
                    self_attention_cache,
                ),
            )
        return results[0] if len(results) == 1 else results
