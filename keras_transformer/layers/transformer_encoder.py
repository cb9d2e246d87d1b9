import keras

from keras_transformer.layers.transformer_encoder_block import TransformerEncoderBlock
from keras_transformer.layers.transformer_stack_base import TransformerStackBase
from keras_transformer.ops.masks import get_keras_mask
from keras_transformer.validation import check_rank


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoder(TransformerStackBase):
    """The paper's encoder: a stack of `num_layers` `TransformerEncoderBlock`s.

    With `norm_first=True` (pre-norm) a final layer normalization is applied
    to the output of the last block.

    Args:
        num_layers: int, number of blocks (6 in the paper).
        num_heads: int, number of attention heads.
        intermediate_dim: int, inner width of the feed-forward networks.
        rematerialize: bool, recompute each block's activations during the
            backward pass instead of keeping them (activation checkpointing:
            memory for one block's activations instead of `num_layers`, for one
            more forward pass of compute). Applies to calls with `training=True`
            (`fit` makes them) that return no attention scores. Use this instead
            of `keras.RematScope`, which fails on layers taking `training`.
            Defaults to `False`.
        dropout: float, residual dropout. Defaults to `0.1`.
        attention_dropout: float. Defaults to `0.0`.
        activation_dropout: float. Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        norm_first: bool, pre-norm (then a final layer norm closes the stack).
            Defaults to `False`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        key_dim: int. Defaults to `width // num_heads`.
        num_key_value_heads: int. Defaults to `num_heads`.
        kernel_initializer: Defaults to `"glorot_uniform"`.
        bias_initializer: Defaults to `"zeros"`.
        flash_attention: bool or `None`. Defaults to `None`.
        sliding_window: int or `None`. Defaults to `None`.
        kernel_regularizer: Defaults to `None`.
        bias_regularizer: Defaults to `None`.
        activity_regularizer: Defaults to `None`.
        kernel_constraint: Defaults to `None`.
        bias_constraint: Defaults to `None`.
        relative_position: `None`, `"rotary"` or `"alibi"`. Defaults to `None`.
            Each of these is handed to every block: see
            [`TransformerEncoderBlock`][keras_transformer.layers.TransformerEncoderBlock] for what
            it does.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, length, width)`.
        padding_mask: boolean `(batch, length)`. Defaults to the Keras mask
            of `inputs`.
        attention_mask: boolean `(batch, length, length)`.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return the list of each block's
            attention probabilities.

    Example:

    >>> x = keras.random.normal((2, 6, 16))
    >>> tuple(TransformerEncoder(num_layers=2, num_heads=4, intermediate_dim=32)(x).shape)
    (2, 6, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1
    """

    block_class = TransformerEncoderBlock

    def build(self, inputs_shape):
        check_rank("inputs", inputs_shape, 3, "`(batch, length, width)`")
        super().build(inputs_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        if padding_mask is None:
            # Read once: a rematerialized block gets its inputs without their Keras mask.
            padding_mask = get_keras_mask(inputs)
        masks = {"padding_mask": padding_mask, "attention_mask": attention_mask}
        # Only training calls keep activations for a backward pass to recompute.
        remat = self.rematerialize and training is True and not return_attention_scores
        x, all_scores = inputs, []
        for block in self.blocks:
            if remat:
                x = self._rematerialized_block(block, x, masks, training=training)
            else:
                x = block(
                    x, **masks, training=training, return_attention_scores=return_attention_scores
                )
            if return_attention_scores:
                x, scores = x
                all_scores.append(scores)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        return (x, all_scores) if return_attention_scores else x

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        length = inputs.shape[1]
        shape = (inputs.shape[0], self.num_heads, length, length)
        return outputs, [keras.KerasTensor(shape, dtype=self.compute_dtype)] * self.num_layers
