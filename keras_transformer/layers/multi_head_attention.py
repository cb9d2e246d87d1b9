import math

import keras
from keras import ops

from keras_transformer import sublayer_names as names
from keras_transformer.layers.attention_checks import (
    check_attention_arguments,
    check_attention_axes,
    check_call,
    check_call_masks,
    check_input_shapes,
    head_size,
    reject_position,
    renamed_position,
    resolve_output_dim,
)
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.projection_options import (
    projection_options,
    serialize_projection_options,
)
from keras_transformer.layers.sublayer_quantization import SublayerQuantization
from keras_transformer.ops.alibi import alibi_bias
from keras_transformer.ops.attention import attend
from keras_transformer.ops.masks import causal_mask, merge_masks, sliding_window_mask
from keras_transformer.ops.rotary import apply_rotary_embedding
from keras_transformer.validation import check_bool, check_positive_int

# How many trailing axes a projection contracts: the features of a query, key or value, or
# the heads and head size of the attended values.
FEATURE_AXES = 1
HEAD_AXES = 2


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(SublayerQuantization, keras.layers.Layer):
    r"""Multi-head attention (Vaswani et al., 2017, section 3.2.2).

    $$
    \operatorname{MultiHead}(Q, K, V) = \operatorname{Concat}(\mathrm{head}_1, \ldots,
        \mathrm{head}_h)\, W^O
    $$

    with

    $$
    \mathrm{head}_i = \operatorname{Attention}(Q W_i^Q, K W_i^K, V W_i^V).
    $$

    The attention itself is [`keras_transformer.ops.scaled_dot_product_attention`][].
    Grouped-query heads (`num_key_value_heads`), a sliding window, a gate, rotary or
    ALiBi positions and a key/value cache are options; the layer takes Keras's
    arguments for `keras.layers.MultiHeadAttention` by keyword, and the
    [differences that remain][differences-from-keraslayersmultiheadattention]
    are listed with the layers.

    Relative positions (`relative_position`) and the key/value cache (`cache`,
    `cache_update_index`) follow a cache's absolute positions: the new steps are
    rotated or biased at `cache_update_index + i`, and the cache holds rotated keys.

    Args:
        num_heads: int, number of attention heads.
        key_dim: int, size of each query/key head. Defaults to
            `query_dim // num_heads`; a width not divisible by `num_heads` is
            an error rather than a silent truncation.
        value_dim: int, size of each value head. Defaults to `key_dim`.
        num_key_value_heads: int, number of key/value heads; must divide
            `num_heads`. Defaults to `num_heads` (plain multi-head attention).
        dropout: float, dropout rate on the attention probabilities.
            Defaults to `0.0`.
        use_bias: bool, whether the projections have biases. Defaults to `True`.
        output_dim: int, size of the output. Defaults to the query's last axis.
        output_shape: Keras's name for `output_dim`: an int or a one-element
            tuple. Defaults to `None`.
        attention_axes: `None` or `1`, accepted for Keras's sake: attention is
            always over axis 1 of rank-3 inputs. Defaults to `None`.
        sliding_window: int, if set each query attends only to keys within
            `sliding_window - 1` positions of its own (a symmetric band; with
            `use_causal_mask=True` or a cache, the query and the
            `sliding_window - 1` keys before it). Defaults to `None` (all keys).
        use_gate: bool, multiply each head's output by
            $\sigma(q W_g + b_g)$, $q$ the query, before the output projection
            (Qiu et al., 2025). Defaults to `False`.
        relative_position: `None`, `"rotary"` or `"alibi"`, the positions the
            attention encodes itself: rotary turns each query and key head by its
            position (Su et al.), ALiBi adds $-m_h \left| i - j \right|$ to head
            $h$'s logits (Press et al.). Configs saved with its
            earlier name, `position`, still load. Rotary needs an even `key_dim`; ALiBi
            takes the explicit attention path (its bias is added in float32),
            so not `flash_attention=True`. Defaults to `None` (none: the
            paper's attention, positions come from the embeddings).
        max_wavelength: float, the longest wavelength of the rotary angles
            (`relative_position="rotary"` only). Defaults to `10000`.
        flash_attention: bool or `None`. `True` requires the flash kernel of
            `keras.ops.dot_product_attention`: dropout, attention scores or a
            value head size other than `key_dim` then raise a `ValueError`, as
            does a backend or device without the kernel. `False` never uses it.
            Defaults to `None`: Keras's global setting
            (`keras.config.enable_flash_attention()`), else the backend decides.
        kernel_initializer: initializer for the projection kernels.
            Defaults to `"glorot_uniform"`.
        bias_initializer: initializer for the projection biases.
            Defaults to `"zeros"`.
        kernel_regularizer: regularizer for every projection kernel.
            Defaults to `None`.
        bias_regularizer: regularizer for every projection bias.
            Defaults to `None`.
        activity_regularizer: regularizer for every projection's output (one
            loss per projection, as in Keras). Defaults to `None`.
        kernel_constraint: constraint for every projection kernel.
            Defaults to `None`.
        bias_constraint: constraint for every projection bias.
            Defaults to `None`.
        seed: int, seed for the attention dropout. Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor of shape `(batch, target_length, query_dim)`.
        value: tensor of shape `(batch, source_length, value_dim_in)`. May be
            `None` when a precomputed `cache` is given.
        key: tensor of shape `(batch, source_length, key_dim_in)`.
            Defaults to `value`.
        attention_mask: boolean tensor of shape
            `(batch, target_length, source_length)`, or
            `(batch, num_heads, target_length, source_length)` for a mask per
            head (or broadcastable to either); `True` means attend.
        use_causal_mask: bool, whether query `i` only attends to keys `<= i`.
        cache: `(batch, 2, max_length, num_key_value_heads, key_dim)`, keys at
            index 0 and values at index 1. With `cache_update_index`, the new
            steps' keys and values are written there, each new query attends to
            positions `<= cache_update_index + i` (no extra mask needed), and the
            updated cache is returned. Without, it is precomputed (see
            [`compute_cache`][keras_transformer.layers.MultiHeadAttention.compute_cache]),
            read and not returned; its batch may divide the query's, for the beams
            of one source.
        cache_update_index: int or scalar tensor, the position of the first new step.
        return_attention_scores: bool, also return the attention
            probabilities, shape `(batch, num_heads, target_length, source_length)`.
        training: bool, whether dropout is active.
        query_mask, value_mask, key_mask: Keras masks of shape
            `(batch, length)`, `False` at padding. Keras fills them from the
            inputs' masks. With a `cache`, `query_mask` and `value_mask` (which
            describe the new steps) are ignored and `key_mask` covers the
            cache's positions, `(batch, cache_length)`.

    Returns:
        `outputs` of shape `(batch, target_length, output_dim)`; with
        `return_attention_scores`, `(outputs, scores)`; with a `cache` and a
        `cache_update_index`, the updated cache last: `(outputs, cache)` or
        `(outputs, scores, cache)`.

    Example:

    >>> layer = MultiHeadAttention(num_heads=2)
    >>> x = keras.random.normal((3, 5, 8))
    >>> tuple(layer(x, x, use_causal_mask=True).shape)
    (3, 5, 8)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
        - [Ainslie et al., 2023](https://arxiv.org/abs/2305.13245) (grouped-query attention)
        - [Beltagy et al., 2020](https://arxiv.org/abs/2004.05150) (sliding-window attention)
        - [Qiu et al., 2025](https://arxiv.org/abs/2505.06708) (gated attention)
        - [Su et al., 2021](https://arxiv.org/abs/2104.09864) (rotary position embedding)
        - [Press et al., 2022](https://arxiv.org/abs/2108.12409) (ALiBi)
    """

    def __init__(
        self,
        num_heads,
        key_dim=None,
        value_dim=None,
        num_key_value_heads=None,
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        sliding_window=None,
        use_gate=False,
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        output_shape=None,
        attention_axes=None,
        relative_position=None,
        max_wavelength=10000,
        **kwargs,
    ):
        reject_position(kwargs, "MultiHeadAttention")
        super().__init__(**kwargs)
        check_attention_arguments(
            num_heads,
            key_dim=key_dim,
            num_key_value_heads=num_key_value_heads,
            sliding_window=sliding_window,
            dropout=dropout,
            flash_attention=flash_attention,
            relative_position=relative_position,
            max_wavelength=max_wavelength,
        )
        output_dim = resolve_output_dim(output_dim, output_shape)
        check_attention_axes(attention_axes)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("output_dim", output_dim, allow_none=True)
        check_bool("use_gate", use_gate)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.num_key_value_heads = num_key_value_heads
        self.dropout = dropout
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.flash_attention = flash_attention
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.sliding_window = sliding_window
        self.use_gate = use_gate
        self.relative_position = relative_position
        self.max_wavelength = max_wavelength
        # Kept apart from the base layer's `activity_regularizer`, which would apply to
        # the layer's output instead of each projection's.
        self._projection_options = projection_options(locals())
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True

    def _sublayer_kwargs(self):
        return dict(
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            **self._projection_options,
        )

    def _head_projection(self, name, heads, head_dim, activation=None):
        """An `EinsumDense` from `(batch, length, features)` to `(..., heads, head_dim)`."""
        return keras.layers.EinsumDense(
            "abc,cde->abde",
            output_shape=(None, heads, head_dim),
            bias_axes="de" if self.use_bias else None,
            activation=activation,
            name=name,
            **self._sublayer_kwargs(),
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        check_input_shapes(query_shape, value_shape, key_shape)
        query_dim = query_shape[-1]
        self._key_dim = head_size(query_dim, self.num_heads, self.key_dim, self.relative_position)
        self._value_dim = self.value_dim or self._key_dim
        self._num_kv_heads = self.num_key_value_heads or self.num_heads
        if value_shape is None:
            value_shape = query_shape
        if key_shape is None:
            key_shape = value_shape
        self.query_dense = self._head_projection(names.QUERY, self.num_heads, self._key_dim)
        self.query_dense.build(query_shape)
        self.key_dense = self._head_projection(names.KEY, self._num_kv_heads, self._key_dim)
        self.key_dense.build(key_shape)
        # Created between key and value, as Keras's layer does, so the weights list in
        # the same order and `set_weights(keras_layer.get_weights())` copies them.
        self.gate_dense = None
        if self.use_gate:
            self.gate_dense = self._head_projection(
                names.GATE, self.num_heads, self._value_dim, activation="sigmoid"
            )
            self.gate_dense.build(query_shape)
        self.value_dense = self._head_projection(names.VALUE, self._num_kv_heads, self._value_dim)
        self.value_dense.build(value_shape)
        self._output_dim = self.output_dim or query_dim
        self.output_dense = keras.layers.EinsumDense(
            "abcd,cde->abe",
            output_shape=(None, self._output_dim),
            bias_axes="e" if self.use_bias else None,
            name=names.ATTENTION_OUTPUT,
            **self._sublayer_kwargs(),
        )
        self.output_dense.build((None, None, self.num_heads, self._value_dim))
        for projection in (self.query_dense, self.key_dense, self.value_dense):
            # Masks are applied to the attention weights; the projections pass them through.
            projection.supports_masking = True
        self.built = True

    def _fusable(self):
        # A quantised projection's `kernel` holds integers without their scales, so
        # concatenating kernels would be wrong; the projections then run through their
        # own quantised calls instead (measured in benchmarks/quantization.py). An
        # activity regularizer needs each projection's own call, which records its loss.
        return self._projection_options["activity_regularizer"] is None and all(
            d.quantization_mode is None
            for d in (self.query_dense, self.key_dense, self.value_dense)
        )

    def _dense(self, dense, x, contracted):
        """`dense(x)` for a projection `EinsumDense`, as one 2-D matrix product.

        `contracted` is how many trailing axes of `x` the kernel contracts (1 for
        the query/key/value projections, 2 for the output one). On TensorFlow's
        CPU runtime an `EinsumDense` runs as an `Einsum` op, whose training step
        is several times slower than a reshape and `MatMul`. A quantised
        projection runs its own call (its `kernel` holds integers without their
        scales), and one with an activity regularizer its own call too (which
        records the loss); `kernel` carries a LoRA delta when LoRA is enabled.
        """
        if dense.quantization_mode is not None or dense.activity_regularizer is not None:
            return dense(x)
        kernel = ops.cast(dense.kernel, x.dtype)
        in_shape, out_shape = kernel.shape[:contracted], kernel.shape[contracted:]
        in_size, out_size = math.prod(in_shape), math.prod(out_shape)
        outputs = ops.matmul(
            ops.reshape(x, (-1, in_size)), ops.reshape(kernel, (in_size, out_size))
        )
        if dense.bias is not None:
            outputs = outputs + ops.reshape(ops.cast(dense.bias, x.dtype), (out_size,))
        leading = [ops.shape(x)[i] for i in range(len(x.shape) - contracted)]
        return dense.activation(ops.reshape(outputs, (*leading, *out_shape)))

    def _project_self_attention(self, x):
        """Query, key and value of one input with a single matrix multiplication."""
        dense = (self.query_dense, self.key_dense, self.value_dense)
        heads = (self.num_heads, self._num_kv_heads, self._num_kv_heads)
        dims = (self._key_dim, self._key_dim, self._value_dim)
        sizes = [h * d for h, d in zip(heads, dims)]
        width = x.shape[-1]
        kernel = ops.concatenate(
            [ops.reshape(ops.cast(d.kernel, x.dtype), (width, s)) for d, s in zip(dense, sizes)],
            axis=-1,
        )
        batch_size, length = ops.shape(x)[0], ops.shape(x)[1]
        projected = ops.matmul(ops.reshape(x, (-1, width)), kernel)
        if self.use_bias:
            bias = ops.concatenate(
                [ops.reshape(ops.cast(d.bias, x.dtype), (s,)) for d, s in zip(dense, sizes)]
            )
            projected = projected + bias
        q, k, v = ops.split(projected, [sizes[0], sizes[0] + sizes[1]], axis=-1)
        return (
            ops.reshape(q, (batch_size, length, heads[0], dims[0])),
            ops.reshape(k, (batch_size, length, heads[1], dims[1])),
            ops.reshape(v, (batch_size, length, heads[2], dims[2])),
        )

    def cache_shape(self, batch_size, length):
        """The shape of this layer's key/value cache for `length` positions.

        Args:
            batch_size: int or scalar tensor.
            length: int, the number of cached positions.

        Returns:
            `(batch_size, 2, length, num_key_value_heads, key_dim)`.
        """
        if not self.built:
            raise ValueError(
                "`cache_shape` needs the layer's sizes: build the layer (call it once) first."
            )
        return (batch_size, 2, length, self._num_kv_heads, self._key_dim)

    def compute_cache(self, value, key=None):
        """Precomputes the key/value cache for a fixed `value` (e.g. encoder outputs).

        Args:
            value: tensor of shape `(batch, source_length, features)`.
            key: tensor of shape `(batch, source_length, features)`.
                Defaults to `value`.

        Returns:
            A tensor of shape `(batch, 2, source_length, num_key_value_heads, key_dim)`,
            to pass as `cache` with `cache_update_index=None`.
        """
        if not self.built:
            self.build(
                (None, None, value.shape[-1]), value.shape, None if key is None else key.shape
            )
        key = value if key is None else key
        keys = self._dense(self.key_dense, key, FEATURE_AXES)
        if self.relative_position == "rotary":
            keys = apply_rotary_embedding(keys, 0, self.max_wavelength)
        return ops.stack([keys, self._dense(self.value_dense, value, FEATURE_AXES)], axis=1)

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        decoding = cache is not None and cache_update_index is not None
        precomputed = cache is not None and cache_update_index is None
        flash_attention = self._flash_attention()
        check_call(value, precomputed, flash_attention, return_attention_scores)
        start = cache_update_index if decoding else 0

        # Project to heads: one matrix product for self-attention's q, k and v.
        if key is None and value is query and self._value_dim == self._key_dim and self._fusable():
            q, k, v = self._project_self_attention(query)
        else:
            q = self._dense(self.query_dense, query, FEATURE_AXES)
            if not precomputed:
                k = self._dense(self.key_dense, value if key is None else key, FEATURE_AXES)
                v = self._dense(self.value_dense, value, FEATURE_AXES)
        if self.relative_position == "rotary":
            q = apply_rotary_embedding(q, start, self.max_wavelength)
            if not precomputed:  # a precomputed cache holds keys rotated from position 0
                k = apply_rotary_embedding(k, start, self.max_wavelength)
        if precomputed:
            k, v = cache[:, 0], cache[:, 1]
        # Beam search keeps the cross-attention cache once per source: `k` adjacent query
        # rows, the beams of one source, share a cache row and its `key_mask` row. With one
        # query each, no `attention_mask`, `query_mask` or returned scores, they attend as
        # that row's `k` queries, multiplied and summed, so the cache is read once for all.
        beams_share_cache = (
            precomputed
            and q.shape[1] == 1
            and attention_mask is None
            and query_mask is None
            and not return_attention_scores
            and self.relative_position != "alibi"
            and self.sliding_window is None
        )
        if beams_share_cache:
            q = ops.reshape(q, (ops.shape(k)[0], -1, *q.shape[2:]))
        if decoding:
            # One write of the new steps into the cache, which XLA does in place in a
            # decoding loop (slicing keys and values out and stacking them again copied
            # the whole cache every step).
            new_steps = ops.cast(ops.stack([k, v], axis=1), cache.dtype)
            cache = ops.slice_update(cache, [0, 0, cache_update_index, 0, 0], new_steps)
            k, v = cache[:, 0], cache[:, 1]

        masks = self._attention_masks(
            ops.shape(q)[1], ops.shape(k)[1], start, attention_mask,
            use_causal_mask or decoding, query_mask,
            None if cache is not None else value_mask, key_mask,
        )  # fmt: skip
        bias = None
        if self.relative_position == "alibi":
            bias = alibi_bias(self.num_heads, ops.shape(q)[1], ops.shape(k)[1], start)
        attended = attend(
            q,
            k,
            v,
            **masks,
            bias=bias,
            dropout=self.dropout if training else 0.0,
            seed=self.seed_generator,
            flash_attention=flash_attention,
            return_attention_scores=return_attention_scores,
            elementwise=beams_share_cache or None,
        )
        if beams_share_cache:
            attended = ops.reshape(attended, (-1, 1, *attended.shape[2:]))
        if return_attention_scores:
            attended, scores = attended
        if self.gate_dense is not None:
            attended = attended * self._dense(self.gate_dense, query, FEATURE_AXES)
        outputs = self._dense(self.output_dense, attended, HEAD_AXES)

        results = (outputs, scores) if return_attention_scores else (outputs,)
        if decoding:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _flash_attention(self):
        """`flash_attention`, or Keras's global setting where it is `None`."""
        if self.flash_attention is not None:
            return self.flash_attention
        return keras.config.is_flash_attention_enabled()

    def _attention_masks(
        self,
        query_length,
        key_length,
        start,
        attention_mask,
        causal,
        query_mask,
        value_mask,
        key_mask,
    ):
        """The masks as `attend` takes them: padding, causality and the rest apart.

        Checks the masks a caller passed (the layer's only checks at call time): the
        attention mask `(batch, T, S)` or `(batch, heads, T, S)` and the key mask
        `(batch, S)`; `start` is the absolute position of the first query.
        """
        check_call_masks(attention_mask, key_mask, query_length, key_length, self.num_heads)
        if attention_mask is not None and len(attention_mask.shape) < 4:
            # (T, S) or (batch, T, S) to (batch | 1, 1, T, S)
            attention_mask = _expand(
                attention_mask, (0, 1) if len(attention_mask.shape) == 2 else (1,)
            )
        # Causality from a cache's first slot is the kernel's flag; from a later step it is a
        # mask. With a cache, unfilled slots lie in every new step's future, so it also hides
        # them.
        from_first_key = isinstance(start, int) and start == 0
        return dict(
            query_padding=query_mask,
            key_padding=merge_masks(value_mask, key_mask),
            causal=causal and from_first_key,
            # Broadcast to rank 4 with `expand_dims`, which LiteRT's built-in operators
            # cover (a new axis by indexing becomes a TensorFlow-only op there).
            mask=merge_masks(
                attention_mask,
                _expand(causal_mask(query_length, key_length, start), (0, 1))
                if causal and not from_first_key
                else None,
                None
                if self.sliding_window is None
                else _expand(
                    sliding_window_mask(query_length, key_length, self.sliding_window, start),
                    (0, 1),
                ),
            ),
        )

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        check_input_shapes(query_shape, value_shape, key_shape)
        output_dim = self.output_dim or query_shape[-1]
        return tuple(query_shape[:-1]) + (output_dim,)

    def compute_output_spec(
        self, query, value=None, key=None, cache=None, cache_update_index=None, **kwargs
    ):
        return_attention_scores = kwargs.get("return_attention_scores", False)
        output_shape = self.compute_output_shape(
            query.shape,
            None if value is None else value.shape,
            None if key is None else key.shape,
        )
        results = (keras.KerasTensor(output_shape, dtype=self.compute_dtype),)
        if return_attention_scores:
            source_length = (
                cache.shape[2] if cache is not None else (value if key is None else key).shape[1]
            )
            scores_shape = (query.shape[0], self.num_heads, query.shape[1], source_length)
            results += (keras.KerasTensor(scores_shape, dtype=self.compute_dtype),)
        if cache is not None and cache_update_index is not None:
            results += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
        return results[0] if len(results) == 1 else results

    @classmethod
    def from_config(cls, config):
        return super().from_config(renamed_position(config))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "flash_attention": self.flash_attention,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
                "sliding_window": self.sliding_window,
                "use_gate": self.use_gate,
                "relative_position": self.relative_position,
                "max_wavelength": self.max_wavelength,
                **serialize_projection_options(self._projection_options),
            }
        )
        return config


def _expand(mask, axes):
    for axis in axes:
        mask = ops.expand_dims(mask, axis)
    return mask
