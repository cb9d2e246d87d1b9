import keras

from keras_transformer.layers.transformer_decoder import TransformerDecoder
from keras_transformer.models.transformer_model_base import TransformerModelBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerLM(TransformerModelBase):
    """A decoder-only (GPT-style) Transformer language model.

    The paper's decoder without cross-attention: token embeddings (×√d) plus
    positions, a stack of causal self-attention blocks, and logits over the
    vocabulary (tied to the embedding by default). Padding (`pad_id`) is masked.
    Logits are float32 even under mixed precision.

    Inputs are int token ids `(batch, length)` (or a dict with key
    `"token_ids"`); the output is `(batch, length, vocabulary_size)` logits
    for the next token at each position.

    Args:
        vocabulary_size: int.
        num_layers: int, number of decoder blocks.
        hidden_dim: int, `d_model`. Defaults to `512`.
        num_heads: int. Defaults to `8`.
        intermediate_dim: int, `d_ff`. Defaults to `2048`.
        dropout: float. Defaults to `0.1`.
        max_sequence_length: int; required with `position="learned"`.
            Defaults to `None`.
        position: `"sinusoidal"` (the paper's table added to the embeddings),
            `"learned"` (a trained table), `"rotary"` (queries and keys rotated
            by their position in every self-attention), `"alibi"` (a linear
            distance penalty on every self-attention's logits) or `None`.
            Defaults to `"sinusoidal"`.
        norm_first: bool, pre-norm (as GPT-2) instead of post-norm.
            Defaults to `False`.
        tie_output_embeddings: bool. Defaults to `True`.
        pad_id: int. Defaults to `0`.
        attention_dropout: float. Defaults to `0.0`.
        activation_dropout: float. Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        num_key_value_heads: int, for grouped-query attention. Defaults to `None`.
        sliding_window: int, each position attends to itself and the
            `sliding_window - 1` positions before it (local attention, also
            in cached generation). Defaults to `None` (all earlier positions).
        scale_embeddings: bool, multiply the token embeddings by √d as the
            paper does; GPT-2 does not. Defaults to `True`.
        end_id: int, the end token,
            [`generate`][keras_transformer.models.TransformerLM.generate]'s
            default. Defaults to `None`.
        **kwargs: base model arguments such as `name` and `dtype`.

    Example:

    >>> from keras_transformer.models import TransformerLM
    >>> lm = TransformerLM(100, num_layers=2, hidden_dim=16, num_heads=2,
    ...                    intermediate_dim=32)
    >>> tuple(lm(keras.ops.ones((2, 7), "int32")).shape)
    (2, 7, 100)

    Train it on `(token_ids[:, :-1], token_ids[:, 1:])` pairs with a loss that
    ignores `pad_id` (what `keras_transformer.models.build("language_modeling",
    ...)` compiles), then continue prompts with `lm.generate`.
    """

    CONFIG_ARGUMENTS = (
        "vocabulary_size",
        "num_layers",
        "hidden_dim",
        "num_heads",
        "intermediate_dim",
        "dropout",
        "max_sequence_length",
        "position",
        "norm_first",
        "tie_output_embeddings",
        "pad_id",
        "attention_dropout",
        "activation_dropout",
        "activation",
        "layer_norm_epsilon",
        "num_key_value_heads",
        "sliding_window",
        "scale_embeddings",
        "end_id",
    )

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=2048,
        dropout=0.1,
        max_sequence_length=None,
        position="sinusoidal",
        norm_first=False,
        tie_output_embeddings=True,
        pad_id=0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-6,
        num_key_value_heads=None,
        sliding_window=None,
        scale_embeddings=True,
        end_id=None,
        **kwargs,
    ):
        super().__init__(pad_id=pad_id, **kwargs)
        self._check_dims(
            vocabulary_size=vocabulary_size, num_layers=num_layers, hidden_dim=hidden_dim
        )
        self._keep_arguments(locals())

        self.embedding = self._embedding(
            vocabulary_size, name="embedding", scale_embeddings=scale_embeddings
        )
        self.decoder = TransformerDecoder(
            num_layers,
            num_key_value_heads=num_key_value_heads,
            sliding_window=sliding_window,
            cross_attention=False,
            name="decoder",
            **self._stack_arguments(),
        )
        self.output_projection = self._output_projection(vocabulary_size)
        self.build()

    def _build_layers(self):
        hidden_shape = (None, None, self.hidden_dim)
        self.embedding.build((None, None))
        self.decoder.build(hidden_shape)
        if self.output_projection is not None:
            self.output_projection.build(hidden_shape)

    def project(self, hidden):
        """Hidden states → float32 logits over the vocabulary.

        Through the embedding matrix (tied, the default) or the
        `output_projection` layer (`tie_output_embeddings=False`).

        Args:
            hidden: float tensor `(..., hidden_dim)`.

        Returns:
            float32 logits `(..., vocabulary_size)`.
        """
        return self._logits(self.embedding, hidden)

    def initial_cache(self, batch_size, max_length):
        """A zero self-attention cache for `max_length` steps.

        Args:
            batch_size: int or scalar int tensor, the rows to decode.
            max_length: int, the positions the cache holds.

        Returns:
            A tuple with one cache per block, zeros of shape `(batch_size, 2,
            max_length, key_value_heads, hidden_dim // num_heads)`
            (`key_value_heads` being `num_key_value_heads` or else
            `num_heads`), to pass to
            [`decode_step`][keras_transformer.models.TransformerLM.decode_step].

        Example:

        >>> lm = TransformerLM(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                    intermediate_dim=32)
        >>> cache = lm.initial_cache(batch_size=2, max_length=8)
        >>> logits, cache = lm.decode_step(keras.ops.ones((2, 3), "int32"), cache, 0)
        >>> tuple(logits.shape)
        (2, 3, 100)
        """
        return self.decoder.initial_self_attention_cache(batch_size, max_length)

    def decode_step(self, token_ids, cache, cache_update_index, padding_mask=None):
        """Runs new steps with the cache; returns `(logits, cache)`.

        `token_ids` `(batch, new_steps)` sit at positions
        `cache_update_index ...`; their keys and values are written into the
        cache. [`generate`][keras_transformer.models.TransformerLM.generate]
        feeds a prompt in one call, then one token a call.

        Args:
            token_ids: int tensor `(batch, new_steps)`.
            cache: the cache from
                [`initial_cache`][keras_transformer.models.TransformerLM.initial_cache], then from
                the previous step.
            cache_update_index: int or scalar int tensor, the position of the
                first new step.
            padding_mask: bool `(batch, max_length)` over the cache slots,
                `False` at slots to ignore. Defaults to `None`.

        Returns:
            `(logits, cache)`: float32 logits `(batch, new_steps,
            vocabulary_size)` and the updated cache.

        See `initial_cache` for an example.
        """
        x = self.embedding(token_ids, start_index=cache_update_index)
        x, cache = self.decoder(
            x,
            decoder_padding_mask=padding_mask,
            self_attention_cache=cache,
            cache_update_index=cache_update_index,
        )
        return self.project(x), cache

    def generate(self, prompt, max_length=None, method="greedy", end_id=None, **kwargs):
        """Continues right-padded prompts (greedy by default).

        The prompt tokens every row has are fed in one pass, the rest one step
        at a time over a static cache, inside one compiled function. See
        [`keras_transformer.generation.generate_lm`][] for every argument
        (`top_k`, `top_p`, `temperature`, `beam_size`, `length_penalty`,
        `num_return_sequences`, `seed`, `jit_compile`, `return_scores`).

        Args:
            prompt: int `(batch, prompt_length)`, right-padded with `pad_id`.
            max_length: int, total output length (prompt included). Defaults
                to `None` (each prompt's length plus 50).
            method: `"greedy"`, `"top_k"`, `"top_p"` or `"beam"`. Defaults to `"greedy"`.
            end_id: int, the end token. Defaults to `None`: the model's
                `end_id`, or with that `None` too, run to `max_length`
                (required for `"beam"`).
            **kwargs: the other arguments of `generate_lm`.

        Returns:
            int32 numpy ids `(batch, length)`, prompt included (or `(batch,
            num_return_sequences, length)`), and scores with `return_scores=True`.

        Example:

        >>> lm = TransformerLM(50, num_layers=1, hidden_dim=16, num_heads=2,
        ...                    intermediate_dim=32)
        >>> ids = lm.generate([[5, 6, 7]], max_length=6, jit_compile=False)
        >>> ids.shape, ids[0, :3].tolist()
        ((1, 6), [5, 6, 7])

        (`jit_compile=False` runs a TensorFlow graph without XLA: a single
        short call is then faster; keep the default `True` for many calls.)
        """
        from keras_transformer.generation.language_model import generate_lm

        return generate_lm(
            self,
            prompt,
            max_length=max_length,
            method=method,
            end_id=self.end_id if end_id is None else end_id,
            **kwargs,
        )

    def call(self, inputs, training=None):
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        x = self.embedding(token_ids, training=training)
        x = self.decoder(x, decoder_padding_mask=self.padding_mask(token_ids), training=training)
        return self.project(x)
