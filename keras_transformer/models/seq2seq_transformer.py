import keras
from keras import ops

from keras_transformer.layers.transformer_decoder import TransformerDecoder
from keras_transformer.layers.transformer_encoder import TransformerEncoder
from keras_transformer.layers.zero_rows import ZeroRows
from keras_transformer.models.transformer_model_base import TransformerModelBase
from keras_transformer.validation import check_bool


@keras.saving.register_keras_serializable(package="keras_transformer")
class Seq2SeqTransformer(TransformerModelBase):
    """The paper's encoder-decoder Transformer for sequence-to-sequence tasks.

    Token embeddings (scaled by √d) plus positions feed an encoder stack; the
    decoder stack attends causally to its own prefix and to the encoder output;
    a linear layer (by default the target embedding matrix, tied) gives the next
    token logits. Padding (`pad_id`) is masked in both stacks. Logits are
    float32 even under mixed precision.

    Inputs are a dict `{"encoder_token_ids": (batch, source_length),
    "decoder_token_ids": (batch, target_length)}` of int token ids (teacher
    forcing: the decoder ids are the targets shifted right behind a start
    token); the output is `(batch, target_length, target_vocabulary_size)`
    logits.

    Args:
        source_vocabulary_size: int, size of the source vocabulary.
        target_vocabulary_size: int, size of the target vocabulary. Defaults
            to `None`, meaning `source_vocabulary_size`.
        num_encoder_layers: int. Defaults to `6`.
        num_decoder_layers: int. Defaults to `6`.
        hidden_dim: int, `d_model`. Defaults to `512`.
        num_heads: int. Defaults to `8`.
        intermediate_dim: int, `d_ff`. Defaults to `2048`.
        dropout: float, `P_drop` on embeddings and every sub-layer output.
            Defaults to `0.1`.
        max_sequence_length: int, the longest sequence; required with
            `position="learned"`. Defaults to `None`.
        position: `"sinusoidal"` (the paper's table added to the embeddings),
            `"learned"` (a trained table), `"rotary"` (queries and keys rotated
            by their position in every self-attention), `"alibi"` (a linear
            distance penalty on every self-attention's logits) or `None`.
            Defaults to `"sinusoidal"`.
        norm_first: bool, pre-norm instead of the paper's post-norm.
            Defaults to `False`.
        share_embeddings: bool, one embedding matrix for source and target (a
            shared vocabulary, as the paper's English-German model). Defaults
            to `False`.
        tie_output_embeddings: bool, use the target embedding matrix as the
            output projection (section 3.4). Defaults to `True`.
        pad_id: int, the padding token id. Defaults to `0`.
        attention_dropout: float. Defaults to `0.0`.
        activation_dropout: float. Defaults to `0.0`.
        activation: feed-forward activation. Defaults to `"relu"`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        num_key_value_heads: int, for grouped-query attention. Defaults to `None`.
        sliding_window: int, every self-attention (encoder and decoder) sees
            only the positions within `sliding_window - 1` of the query's (the
            decoder's, earlier ones only); cross-attention sees the whole
            source. Defaults to `None`.
        scale_embeddings: bool, multiply the token embeddings by √d
            (section 3.4). Defaults to `True`.
        interleave_sinusoids: bool, the sinusoidal table's layout: sin and
            cos alternating, as the paper writes it, or (`False`) sines then
            cosines, as Marian lays it out. Defaults to `True`.
        output_bias: bool, add a learned bias per target token to the logits
            (Marian's `final_logits_bias`). Defaults to `False`.
        zero_pad_embedding: bool, keep the `pad_id` rows of the embeddings at
            zero through training ([`keras_transformer.layers.ZeroRows`][]), as
            PyTorch's `nn.Embedding(padding_idx=...)` does: Marian starts its
            decoder from the pad token's zero embedding. Defaults to `False`.
        start_id: int, the decoder's start token,
            [`generate`][keras_transformer.models.Seq2SeqTransformer.generate]'s
            default. Defaults to `None` (`generate` then needs one).
        end_id: int, the end token, `generate`'s default. Defaults to `None`
            (`generate` then needs one).
        **kwargs: base model arguments such as `name` and `dtype` (a dtype
            policy such as `"mixed_bfloat16"`).

    Example:

    >>> from keras_transformer.models import Seq2SeqTransformer
    >>> model = Seq2SeqTransformer(100, num_encoder_layers=1, num_decoder_layers=1,
    ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
    >>> logits = model({"encoder_token_ids": keras.ops.ones((2, 7), "int32"),
    ...                 "decoder_token_ids": keras.ops.ones((2, 5), "int32")})
    >>> tuple(logits.shape)
    (2, 5, 100)
    >>> model.count_params()
    8768

    Translate with `model.generate` (beam search, greedy search or sampling
    over a key/value cache), after training it with `compile` and `fit` (or
    `keras_transformer.models.build("translation", ...)`, which compiles it
    with the paper's recipe).

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    INPUT_NAMES = ("encoder_token_ids", "decoder_token_ids")
    CONFIG_ARGUMENTS = (
        "source_vocabulary_size",
        "target_vocabulary_size",
        "num_encoder_layers",
        "num_decoder_layers",
        "hidden_dim",
        "num_heads",
        "intermediate_dim",
        "dropout",
        "max_sequence_length",
        "position",
        "norm_first",
        "share_embeddings",
        "tie_output_embeddings",
        "pad_id",
        "attention_dropout",
        "activation_dropout",
        "activation",
        "layer_norm_epsilon",
        "num_key_value_heads",
        "sliding_window",
        "scale_embeddings",
        "interleave_sinusoids",
        "output_bias",
        "zero_pad_embedding",
        "start_id",
        "end_id",
    )

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size=None,
        num_encoder_layers=6,
        num_decoder_layers=6,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=2048,
        dropout=0.1,
        max_sequence_length=None,
        position="sinusoidal",
        norm_first=False,
        share_embeddings=False,
        tie_output_embeddings=True,
        pad_id=0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-6,
        num_key_value_heads=None,
        sliding_window=None,
        scale_embeddings=True,
        interleave_sinusoids=True,
        output_bias=False,
        zero_pad_embedding=False,
        start_id=None,
        end_id=None,
        **kwargs,
    ):
        super().__init__(pad_id=pad_id, **kwargs)
        target_vocabulary_size = target_vocabulary_size or source_vocabulary_size
        self._check_dims(
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            hidden_dim=hidden_dim,
        )
        if share_embeddings and source_vocabulary_size != target_vocabulary_size:
            raise ValueError(
                "`share_embeddings=True` needs one vocabulary for source and target, but "
                f"source_vocabulary_size={source_vocabulary_size} and "
                f"target_vocabulary_size={target_vocabulary_size}. Use a shared vocabulary "
                "or `share_embeddings=False`."
            )
        flags = (("output_bias", output_bias), ("zero_pad_embedding", zero_pad_embedding))
        for name, value in flags:
            check_bool(name, value)
        self._keep_arguments(locals())

        embedding_args = dict(
            scale_embeddings=scale_embeddings,
            interleave_sinusoids=interleave_sinusoids,
            embeddings_constraint=ZeroRows(pad_id) if zero_pad_embedding else None,
        )
        self.source_embedding = self._embedding(
            source_vocabulary_size, name="source_embedding", **embedding_args
        )
        self.target_embedding = (
            self.source_embedding
            if share_embeddings
            else self._embedding(target_vocabulary_size, name="target_embedding", **embedding_args)
        )
        block_args = dict(
            num_key_value_heads=num_key_value_heads,
            sliding_window=sliding_window,
            **self._stack_arguments(),
        )
        self.encoder = TransformerEncoder(num_encoder_layers, name="encoder", **block_args)
        self.decoder = TransformerDecoder(num_decoder_layers, name="decoder", **block_args)
        self.output_projection = self._output_projection(target_vocabulary_size)
        self.build()

    def _build_layers(self):
        hidden_shape = (None, None, self.hidden_dim)
        self.source_embedding.build((None, None))
        if not self.share_embeddings:
            self.target_embedding.build((None, None))
        self.encoder.build(hidden_shape)
        self.decoder.build(hidden_shape, hidden_shape)
        if self.output_projection is not None:
            self.output_projection.build(hidden_shape)
        self._build_logits_bias(self.target_vocabulary_size)
        if self.zero_pad_embedding:
            # The constraint holds the rows at zero after each update; they start there too.
            for embedding in (self.source_embedding, self.target_embedding):
                table = embedding.token_embedding.embeddings
                table.assign(ZeroRows(self.pad_id)(table))

    def encode(self, encoder_token_ids, training=None):
        """Runs the embedding and the encoder stack over the source ids.

        Args:
            encoder_token_ids: int tensor `(batch, source_length)`, padded with
                `pad_id`.
            training: bool, whether dropout is active. Defaults to `None`.

        Returns:
            `(encoder_outputs, encoder_padding_mask)`: the float
            `(batch, source_length, hidden_dim)` states and the bool
            `(batch, source_length)` mask, `True` at real tokens.

        Example:

        >>> model = Seq2SeqTransformer(100, num_encoder_layers=1, num_decoder_layers=1,
        ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> outputs, mask = model.encode(keras.ops.convert_to_tensor([[5, 6, 0]]))
        >>> tuple(outputs.shape), keras.ops.convert_to_numpy(mask).tolist()
        ((1, 3, 16), [[True, True, False]])
        """
        padding_mask = self.padding_mask(encoder_token_ids)
        x = self.source_embedding(encoder_token_ids, training=training)
        return self.encoder(x, padding_mask=padding_mask, training=training), padding_mask

    def project(self, hidden):
        """Decoder hidden states → float32 logits over the target vocabulary.

        Through the target embedding matrix (tied, the default) or the
        `output_projection` layer (`tie_output_embeddings=False`).

        Args:
            hidden: float tensor `(..., hidden_dim)`.

        Returns:
            float32 logits `(..., target_vocabulary_size)`.
        """
        return self._logits(self.target_embedding, hidden)

    def decode(self, decoder_token_ids, encoder_outputs, encoder_padding_mask=None, training=None):
        """Runs the decoder over whole target prefixes (teacher forcing).

        Args:
            decoder_token_ids: int tensor `(batch, target_length)`, padded with
                `pad_id`.
            encoder_outputs: the states
                [`encode`][keras_transformer.models.Seq2SeqTransformer.encode]
                returns.
            encoder_padding_mask: the mask `encode` returns. Defaults to `None`
                (every source position is attended to).
            training: bool, whether dropout is active. Defaults to `None`.

        Returns:
            float32 logits `(batch, target_length, target_vocabulary_size)`.

        Example:

        >>> model = Seq2SeqTransformer(100, num_encoder_layers=1, num_decoder_layers=1,
        ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> outputs, mask = model.encode(keras.ops.convert_to_tensor([[5, 6, 0]]))
        >>> tuple(model.decode(keras.ops.convert_to_tensor([[2, 7]]), outputs, mask).shape)
        (1, 2, 100)
        """
        x = self.target_embedding(decoder_token_ids, training=training)
        # The first decoder position holds the start token, never padding, even where the
        # start token is the pad token (Marian).
        padding_mask = self.padding_mask(decoder_token_ids)
        padding_mask = ops.concatenate(
            [ops.ones_like(padding_mask[:, :1]), padding_mask[:, 1:]], axis=1
        )
        x = self.decoder(
            x,
            encoder_outputs,
            decoder_padding_mask=padding_mask,
            encoder_padding_mask=encoder_padding_mask,
            training=training,
        )
        return self.project(x)

    def initial_cache(self, encoder_outputs, max_length):
        """`(self_attention_cache, cross_attention_cache)` for incremental decoding.

        The self-attention cache is zeros for `max_length` steps; the
        cross-attention cache holds the encoder output's keys and values,
        computed once.

        Args:
            encoder_outputs: the states
                [`encode`][keras_transformer.models.Seq2SeqTransformer.encode]
                returns, `(batch, source_length, hidden_dim)`.
            max_length: int, the decoder steps the self-attention cache holds.

        Returns:
            `(self_attention_cache, cross_attention_cache)`, to pass to
            [`decode_step`][keras_transformer.models.Seq2SeqTransformer.decode_step], each a tuple
            with one cache per decoder block: zeros of shape
            `(batch, 2, max_length, key_value_heads, hidden_dim // num_heads)`
            (`key_value_heads` being `num_key_value_heads` or else `num_heads`),
            and the encoder output's keys and values in the same layout with
            `source_length` in place of `max_length`.

        Example:

        >>> model = Seq2SeqTransformer(100, num_encoder_layers=1, num_decoder_layers=1,
        ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> outputs, mask = model.encode(keras.ops.convert_to_tensor([[5, 6, 0]]))
        >>> self_cache, cross_cache = model.initial_cache(outputs, max_length=4)
        >>> logits, self_cache = model.decode_step(
        ...     keras.ops.convert_to_tensor([[2]]), self_cache, cross_cache, 0, mask)
        >>> tuple(logits.shape)
        (1, 1, 100)
        """
        batch_size = keras.ops.shape(encoder_outputs)[0]
        self_cache = self.decoder.initial_self_attention_cache(batch_size, max_length)
        return self_cache, self.decoder.compute_cross_attention_cache(encoder_outputs)

    def decode_step(
        self,
        decoder_token_ids,
        self_attention_cache,
        cross_attention_cache,
        cache_update_index,
        encoder_padding_mask=None,
    ):
        """Decodes new steps with the caches; returns `(logits, self_attention_cache)`.

        `decoder_token_ids` `(batch, new_steps)` sit at positions
        `cache_update_index ...`; their keys and values are written into the
        self-attention cache.
        [`generate`][keras_transformer.models.Seq2SeqTransformer.generate] calls
        it one token at a time.

        Args:
            decoder_token_ids: int tensor `(batch, new_steps)`.
            self_attention_cache: the self-attention cache (from
                [`initial_cache`][keras_transformer.models.Seq2SeqTransformer.initial_cache], then
                from the previous step).
            cross_attention_cache: the cross-attention cache from
                `initial_cache`.
            cache_update_index: int or scalar int tensor, the position of the
                first new step.
            encoder_padding_mask: the mask
                [`encode`][keras_transformer.models.Seq2SeqTransformer.encode]
                returns. Defaults to `None`.

        Returns:
            `(logits, self_attention_cache)`: float32 logits `(batch,
            new_steps, target_vocabulary_size)` and the updated cache.

        See `initial_cache` for an example.
        """
        x = self.target_embedding(decoder_token_ids, start_index=cache_update_index)
        x, self_attention_cache = self.decoder(
            x,
            None,
            encoder_padding_mask=encoder_padding_mask,
            self_attention_cache=self_attention_cache,
            cross_attention_cache=cross_attention_cache,
            cache_update_index=cache_update_index,
        )
        return self.project(x), self_attention_cache

    def generate(
        self,
        encoder_token_ids,
        max_length=None,
        method="beam",
        beam_size=4,
        length_penalty=0.6,
        num_return_sequences=1,
        start_id=None,
        end_id=None,
        **kwargs,
    ):
        """Generates target token ids (beam search by default).

        The encoder runs once, cross-attention keys and values are computed
        once, and the decoder steps over a static self-attention cache inside
        one compiled function. See
        [`keras_transformer.generation.generate_seq2seq`][] for every argument
        (`top_k`, `top_p`, `temperature`, `seed`, `jit_compile`,
        `return_scores`).

        Args:
            encoder_token_ids: int `(batch, source_length)`, padded with `pad_id`.
            max_length: int, most generated tokens per sequence. Defaults to
                `None` (each source's length plus 50).
            method: `"beam"`, `"greedy"`, `"top_k"` or `"top_p"`. Defaults to `"beam"`.
            beam_size: int. Defaults to `4`.
            length_penalty: float, the GNMT `alpha`. Defaults to `0.6`.
            num_return_sequences: int. Defaults to `1`.
            start_id: int, the decoder's start token. Defaults to `None`:
                the model's `start_id` (a `ValueError` if that is `None` too).
            end_id: int, the end token. Defaults to `None`: the model's
                `end_id` (a `ValueError` if that is `None` too).
            **kwargs: the other arguments of `generate_seq2seq`.

        Returns:
            int32 numpy ids `(batch, length)` (or `(batch, num_return_sequences,
            length)`), and scores with `return_scores=True`.

        Example:

        An untrained model stops at `max_length`, or earlier at `end_id`:

        >>> model = Seq2SeqTransformer(50, num_encoder_layers=1, num_decoder_layers=1,
        ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> ids = model.generate([[5, 6, 7, 0]], max_length=4, start_id=1, end_id=2,
        ...                      method="greedy", jit_compile=False)
        >>> ids.shape[0], ids.shape[1] <= 4, str(ids.dtype)
        (1, True, 'int32')

        (`jit_compile=False` runs a TensorFlow graph without XLA: a single
        short call is then faster; keep the default `True` for many calls.)

        References:
            - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7
        """
        from keras_transformer.generation.seq2seq import generate_seq2seq

        return generate_seq2seq(
            self,
            encoder_token_ids,
            max_length=max_length,
            method=method,
            beam_size=beam_size,
            length_penalty=length_penalty,
            num_return_sequences=num_return_sequences,
            start_id=self.start_id if start_id is None else start_id,
            end_id=self.end_id if end_id is None else end_id,
            **kwargs,
        )

    def call(self, inputs, training=None):
        encoder_outputs, encoder_padding_mask = self.encode(
            inputs["encoder_token_ids"], training=training
        )
        return self.decode(
            inputs["decoder_token_ids"], encoder_outputs, encoder_padding_mask, training=training
        )
