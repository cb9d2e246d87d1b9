import keras

from keras_transformer.layers.transformer_block_base import TransformerBlockBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoderBlock(TransformerBlockBase):
    """One encoder layer of the paper: self-attention, then a feed-forward network.

    Each sub-layer has a residual connection, dropout and layer normalization.
    `norm_first=False` is the paper's post-norm, `LayerNorm(x + Dropout(F(x)))`;
    `norm_first=True` is pre-norm, `x + Dropout(F(LayerNorm(x)))`, which trains
    more stably without warm-up (Xiong et al., 2020); stack pre-norm blocks with
    [`TransformerEncoder`][keras_transformer.layers.TransformerEncoder], which
    adds the final layer norm.

    Args:
        num_heads: int, number of attention heads.
        intermediate_dim: int, inner width of the feed-forward network.
        dropout: float, residual dropout on each sub-layer's output (`P_drop`,
            0.1 in the paper). Defaults to `0.1`.
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
        kernel_initializer: initializer for all kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer for all biases. Defaults to `"zeros"`.
        flash_attention: bool or `None`, see
            [`MultiHeadAttention`][keras_transformer.layers.MultiHeadAttention].
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
        relative_position: `"rotary"` or `"alibi"` make the self-attention
            encode positions (see `MultiHeadAttention`); `None` leaves it
            position-free, for absolute positions added to the embeddings.
            Configs saved with its earlier name, `position`, still load.
            Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, length, width)`.
        padding_mask: boolean tensor `(batch, length)`, `False` at padding.
            Defaults to the Keras mask of `inputs`.
        attention_mask: boolean tensor `(batch, length, length)`.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return the attention
            probabilities `(batch, num_heads, length, length)`.

    Returns:
        `outputs` `(batch, length, width)`, or `(outputs, scores)` with
        `return_attention_scores=True`.

    Example:

    >>> x = keras.random.normal((2, 6, 16))
    >>> tuple(TransformerEncoderBlock(num_heads=4, intermediate_dim=32)(x).shape)
    (2, 6, 16)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1
        - [Xiong et al., 2020](https://arxiv.org/abs/2002.04745) (pre-norm)
    """

    def build(self, inputs_shape):
        # One parameter: Keras hands `build` the shapes of the `call` arguments its
        # parameters name, and this block's `call` has no `encoder_outputs`.
        super().build(inputs_shape)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        # Self-attention sub-layer: post-norm `LN(x + Dropout(Attention(x)))`, or
        # pre-norm `x + Dropout(Attention(LN(x)))`. The attention layer checks and
        # merges the masks; Keras hands it the padding mask of `h` as `value_mask`.
        x = inputs
        h = self.self_attention_layer_norm(x) if self.norm_first else x
        h = self.self_attention(
            h,
            h,
            attention_mask=attention_mask,
            key_mask=padding_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        if return_attention_scores:
            h, scores = h
        x = x + self.self_attention_dropout(h, training=training)
        if not self.norm_first:
            x = self.self_attention_layer_norm(x)

        # Feed-forward sub-layer, the same way.
        h = self.feed_forward_layer_norm(x) if self.norm_first else x
        h = self.feed_forward(h, training=training)
        x = x + self.feed_forward_dropout(h, training=training)
        if not self.norm_first:
            x = self.feed_forward_layer_norm(x)
        return (x, scores) if return_attention_scores else x

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        length = inputs.shape[1]
        scores = keras.KerasTensor(
            (inputs.shape[0], self.num_heads, length, length), dtype=self.compute_dtype
        )
        return outputs, scores
