"""`Seq2SeqTransformer.generate`: encode once, then search over the cached decoder."""

import numpy as np
from keras import ops

from keras_transformer.generation.compiled import bucket_length
from keras_transformer.generation.decoding import (
    GenerationOptions,
    check_token_id,
    fit_to_positions,
    learned_position_limit,
    run_generation,
    run_search,
    search_arguments,
    token_matrix,
)
from keras_transformer.validation import check_positive_int

# Default output budget: the source length plus this many tokens.
EXTRA_LENGTH = 50


def make_search_fn(options):
    """The traceable body of `generate_seq2seq` for the checked `options`.

    Returns a function `(model, source, sequences, limits, runtime) ->
    (sequences, scores, num_columns)`: `source` is `(batch, source_length)` ids,
    `sequences` is `(batch, 1 + cache_length)` holding the start id then
    `pad_id`s, `limits` is `(batch,)` int32 (1 + the tokens each row may
    generate) and `runtime` is `options.runtime` as tensors. Used by `generate`
    and by `keras_transformer.saving.export_serving`, which traces it into a
    SavedModel.
    """
    copies = options.copies

    def generate_fn(model, source, sequences, limits, runtime):
        encoder_outputs, encoder_padding_mask = model.encode(source)
        cache_length = ops.shape(sequences)[1] - 1  # the last column is never fed
        self_cache, cross_cache = model.initial_cache(encoder_outputs, cache_length)
        if copies > 1:
            self_cache = tuple(ops.repeat(t, copies, axis=0) for t in self_cache)

        # The cross-attention keys and values stay one row per source: the copies of a
        # source (its beams or samples) attend to that row together.
        def step_fn(token_ids, cache, index, context):
            cross_cache, encoder_padding_mask = context
            logits, cache = model.decode_step(
                token_ids, cache, cross_cache, index, encoder_padding_mask
            )
            return logits[:, -1], cache

        context = (cross_cache, encoder_padding_mask)
        prompt_lengths = ops.ones_like(limits)
        return run_search(
            options, runtime, step_fn, self_cache, sequences, prompt_lengths, limits, 0, context
        )

    return generate_fn


def generate_seq2seq(
    model,
    encoder_token_ids,
    max_length=None,
    method="beam",
    beam_size=4,
    length_penalty=0.6,
    num_return_sequences=1,
    start_id=None,
    end_id=None,
    top_k=50,
    top_p=0.9,
    temperature=1.0,
    seed=None,
    jit_compile=True,
    return_scores=False,
):
    r"""Generates target token ids for a batch of sources with a `Seq2SeqTransformer`.

    The encoder runs once, the cross-attention keys and values are computed once,
    and the decoder runs one token a step against a static self-attention cache,
    all inside one compiled function (see `keras_transformer.generation.compiled`).
    Sources are padded to a length bucket and the output budget to another, so
    calls with nearby lengths reuse the compiled program; padding never changes
    a row's result.

    Args:
        model: a
            [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer].
        encoder_token_ids: int tensor or array `(batch, source_length)`, padded
            with the model's `pad_id`.
        max_length: int, the most tokens to generate per sequence (the end token
            included, the start token not). Defaults to `None`: each row's
            source length (non-pad tokens) plus 50.
        method: `"beam"`, `"greedy"`, `"top_k"` or `"top_p"`. Defaults to `"beam"`.
        beam_size: int, beams per input for `"beam"`. Defaults to `4`.
        length_penalty: float, $\alpha$ of the GNMT length penalty
            $\left((5 + \ell) / 6\right)^\alpha$ that divides beam scores ($\ell$
            counts the generated tokens, end token included; see
            [`gnmt_length_penalty`][keras_transformer.generation.gnmt_length_penalty]).
            Defaults to `0.6`.
        num_return_sequences: int, outputs per input (best first for beam
            search, independent draws for sampling). Defaults to `1`.
        start_id: int, the token the decoder starts from. Required: the
            default `None` raises a `ValueError`.
        end_id: int, the token that ends a sequence. Required: the default
            `None` raises a `ValueError`.
        top_k: int, for `"top_k"`: sample among the `top_k` most likely tokens.
            Defaults to `50`.
        top_p: float in `(0, 1]`, for `"top_p"`: sample from the smallest set of
            tokens whose probability reaches `top_p`. Defaults to `0.9`.
        temperature: float, divides the logits before sampling. Defaults to `1.0`.
        seed: int, makes sampling reproducible. Defaults to `None` (a seed drawn
            from Python's `random`, which `keras.utils.set_random_seed` seeds).
        jit_compile: bool, compile with XLA (`tf.function(jit_compile=True)` or
            `jax.jit`); `False` runs a TensorFlow graph, or JAX eagerly.
            Defaults to `True`.
        return_scores: bool, also return scores. Defaults to `False`.

    Returns:
        int32 numpy token ids `(batch, length)`, or `(batch,
        num_return_sequences, length)` when `num_return_sequences > 1`, without
        the start token; after a sequence's end token come `pad_id`s. `length`
        is the longest output of the batch. With `return_scores=True`, a tuple
        `(token_ids, scores)`: float32 `(batch[, num_return_sequences])`, the
        length-normalised log-probability for beam search and the summed
        log-probability of the generated tokens (under the model's unfiltered
        distribution) otherwise.

    Raises:
        ValueError: for a missing or out-of-vocabulary `start_id` / `end_id`,
            an unknown `method`, a bad size or rate, or a `max_length` (or
            source) longer than a learned position table.

    Example:

    An untrained model, so the tokens mean nothing; beam search returns the
    best hypothesis and, with `return_scores=True`, its length-normalised
    log-probability:

    >>> from keras_transformer.generation import generate_seq2seq
    >>> from keras_transformer.models import Seq2SeqTransformer
    >>> model = Seq2SeqTransformer(50, num_encoder_layers=1, num_decoder_layers=1,
    ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
    >>> ids, scores = generate_seq2seq(model, [[5, 6, 7, 0], [8, 9, 0, 0]],
    ...                                max_length=5, beam_size=2, start_id=1,
    ...                                end_id=2, jit_compile=False, return_scores=True)
    >>> ids.shape[0], ids.shape[1] <= 5, scores.shape, bool((scores <= 0).all())
    (2, True, (2,), True)

    (`jit_compile=False` runs a TensorFlow graph without XLA: a single
    short call is then faster; keep the default `True` for many calls.)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 6.1
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7 (length penalty)
    """
    vocabulary_size = model.target_vocabulary_size
    why = " to generate with a `Seq2SeqTransformer`"
    start_id = check_token_id("start_id", start_id, vocabulary_size, why=why)
    end_id = check_token_id("end_id", end_id, vocabulary_size, why=why)
    options = GenerationOptions(
        **search_arguments(locals()),
        end_id=end_id,
        pad_id=model.pad_id,
        vocabulary_size=vocabulary_size,
    )
    source, source_lengths = token_matrix("encoder_token_ids", encoder_token_ids, model.pad_id)
    position_limit = learned_position_limit(model)
    budgets = _output_budgets(source, source_lengths, max_length, position_limit)
    source = _pad_source(source, position_limit, model.pad_id)
    # The start token, then room for the longest budget in a bucketed number of columns.
    sequences = np.full((source.shape[0], 1 + budgets.cache_length), model.pad_id, "int32")
    sequences[:, 0] = start_id
    return run_generation(
        model,
        ("seq2seq",),
        lambda: make_search_fn(options),
        jit_compile,
        (source, sequences, (1 + budgets.per_row).astype("int32")),
        options,
        first_column=1,
        return_scores=return_scores,
    )


class _Budgets:
    def __init__(self, per_row, cache_length):
        self.per_row, self.cache_length = per_row, cache_length


def _output_budgets(source, source_lengths, max_length, position_limit):
    """Each row's token budget and the bucketed self-attention cache length."""
    if max_length is None:
        budgets = source_lengths + EXTRA_LENGTH
    else:
        budgets = np.full_like(source_lengths, check_positive_int("max_length", max_length))
    # The decoder is fed the start token and all but the last generated token, so the
    # self-attention cache (and a learned position table) needs `budget` positions.
    budgets = fit_to_positions(
        np.maximum(budgets, 1),
        position_limit,
        max_length,
        f"`max_length` is too large for this model: {max_length} tokens need "
        f"{max_length} decoder positions, but its learned position table has "
        f"max_sequence_length={position_limit}. Pass max_length<={position_limit}.",
    )
    longest = int(budgets.max())
    if max_length is None:
        # Room for any row of this width: the compiled search's shapes then follow the
        # input's shape alone, not the lengths of the sentences in it (which would trace a
        # new program for many batches of a test set).
        longest = max(longest, source.shape[1] + EXTRA_LENGTH)
        if position_limit is not None:
            longest = min(longest, position_limit)
    return _Budgets(budgets, bucket_length(longest, position_limit))


def _pad_source(source, position_limit, pad_id):
    """`source` padded to its length bucket, so that nearby lengths share a program."""
    source_columns = bucket_length(source.shape[1], position_limit)
    if source_columns < source.shape[1]:
        raise ValueError(
            f"`encoder_token_ids` is longer ({source.shape[1]}) than the model's learned "
            f"position table (max_sequence_length={position_limit})."
        )
    return np.pad(source, ((0, 0), (0, source_columns - source.shape[1])), constant_values=pad_id)
