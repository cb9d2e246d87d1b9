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
            (`fit` makes them); other calls, and those returning attention scores
            or using caches, run as usual. Use this instead of
            `keras.RematScope`, which fails on layers taking `training`
            (see `docs/keras_features.md`). Defaults to `False`.
        **kwargs: every other `TransformerEncoderBlock` argument (`dropout`,
            `attention_dropout`, `activation_dropout`, `activation`,
            `norm_first`, `layer_norm_epsilon`, `key_dim`,
            `num_key_value_heads`, initializers, `flash_attention`,
            `sliding_window`, `position`, regularizers and constraints) and the base
            layer arguments such as `name` and `dtype`.

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
        self._build_blocks(inputs_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        x = inputs
        all_scores = []
        if padding_mask is None:
            # Read once: a rematerialized block gets its inputs without their Keras mask.
            padding_mask = get_keras_mask(inputs)
        for block in self.blocks:
            if return_attention_scores:
                x, scores = block(
                    x,
                    padding_mask=padding_mask,
                    attention_mask=attention_mask,
                    training=training,
                    return_attention_scores=True,
                )
                all_scores.append(scores)
            else:
                x = self._call_block(
                    block,
                    x,
                    {"padding_mask": padding_mask, "attention_mask": attention_mask},
                    training=training,
                )
        x = self._finish(x)
        return (x, all_scores) if return_attention_scores else x

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        length = inputs.shape[1]
        shape = (inputs.shape[0], self.num_heads, length, length)
        return outputs, [keras.KerasTensor(shape, dtype=self.compute_dtype)] * self.num_layers
