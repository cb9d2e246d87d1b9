"""`TransformerLM.generate`: continue right-padded prompts over a static cache."""

import numpy as np
from keras import ops

from keras_transformer.generation.compiled import bucket_length, prefill_bucket
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

# Default length: each prompt plus this many tokens.
EXTRA_LENGTH = 50


def make_search_fn(options, prefill=0):
    """The traceable body of `generate_lm` for the checked `options`.

    Returns a function `(model, sequences, prompt_lengths, limits, runtime) ->
    (sequences, scores, num_columns)`: `sequences` is `(batch, 1 + cache_length)`
    holding each row's prompt then `pad_id`s, `prompt_lengths` and `limits` are
    `(batch,)` int32 (each row's prompt length and total length, prompt included)
    and `runtime` is `options.runtime` as tensors. The first `prefill` columns
    (every row's prompt covers them) are fed in one pass. Used by `generate_lm` and
    by `keras_transformer.saving.export_serving`, which traces it into a SavedModel
    with `prefill=0` (its prompts' lengths are known only when it runs).
    """
    copies = options.copies

    def generate_fn(model, sequences, prompt_lengths, limits, runtime):
        batch_size, columns = ops.shape(sequences)[0], ops.shape(sequences)[1]
        cache = model.initial_cache(batch_size, columns - 1)  # the last column is never fed
        if prefill:
            # Every row's prompt covers these columns, so one pass fills their cache.
            _, cache = model.decode_step(sequences[:, :prefill], cache, 0)
        if copies > 1:
            cache = tuple(ops.repeat(block_cache, copies, axis=0) for block_cache in cache)

        def step_fn(token_ids, cache, index):
            logits, cache = model.decode_step(token_ids, cache, index)
            return logits[:, -1], cache

        return run_search(
            options, runtime, step_fn, cache, sequences, prompt_lengths, limits, prefill
        )

    return generate_fn


def generate_lm(
    model,
    prompt,
    max_length=None,
    method="greedy",
    top_k=50,
    top_p=0.9,
    temperature=1.0,
    beam_size=4,
    length_penalty=0.6,
    num_return_sequences=1,
    end_id=None,
    seed=None,
    jit_compile=True,
    return_scores=False,
):
    """Continues a batch of prompts with a `TransformerLM`.

    Prompts are right-padded with the model's `pad_id`; every row continues
    after its own last prompt token, at its own positions. The prompt tokens
    that every row has are fed in one pass (in a power-of-two count, to bound
    the number of compiled programs), the rest one token a step, against a
    static cache, all inside one compiled function.

    Args:
        model: a [`TransformerLM`][keras_transformer.models.TransformerLM].
        prompt: int tensor or array `(batch, prompt_length)`, right-padded with
            `pad_id`; every row needs at least one token.
        max_length: int, the total length (prompt included) of the outputs.
            Defaults to `None`: each row's prompt length plus 50.
        method: `"greedy"`, `"top_k"`, `"top_p"` or `"beam"`. Defaults to `"greedy"`.
        top_k: int, for `"top_k"`. Defaults to `50`.
        top_p: float in `(0, 1]`, for `"top_p"`. Defaults to `0.9`.
        temperature: float, divides the logits before sampling. Defaults to `1.0`.
        beam_size: int, for `"beam"`. Defaults to `4`.
        length_penalty: float, `alpha` of the GNMT length penalty (beam search
            only; lengths count generated tokens, not the prompt). Defaults to `0.6`.
        num_return_sequences: int, outputs per prompt. Defaults to `1`.
        end_id: int, the token that ends a sequence. Defaults to `None`: rows
            run to `max_length`. Required for `"beam"`.
        seed: int, makes sampling reproducible. Defaults to `None`.
        jit_compile: bool, see
            [`generate_seq2seq`][keras_transformer.generation.generate_seq2seq].
            Defaults to `True`.
        return_scores: bool, also return scores (see `generate_seq2seq`).
            Defaults to `False`.

    Returns:
        int32 numpy token ids `(batch, length)` (prompt then continuation, then
        `pad_id` after an end token), or `(batch, num_return_sequences,
        length)`; with `return_scores=True`, a tuple `(token_ids, scores)`.

    Raises:
        ValueError: for a prompt that is not right-padded or has an empty row,
            a `max_length` not above the longest prompt (or beyond a learned
            position table), a missing `end_id` for beam search, or a bad
            option.

    Example:

    Each row keeps its prompt and continues after its own last token.

    >>> from keras_transformer.generation import generate_lm
    >>> from keras_transformer.models import TransformerLM
    >>> lm = TransformerLM(50, num_layers=1, hidden_dim=16, num_heads=2,
    ...                    intermediate_dim=32)
    >>> ids = generate_lm(lm, [[5, 6, 7], [8, 0, 0]], max_length=6, jit_compile=False)
    >>> ids.shape, ids[0, :3].tolist(), ids[1, :1].tolist()
    ((2, 6), [5, 6, 7], [8])

    `method="top_k"` or `"top_p"` samples instead; the same `seed` then gives
    the same tokens.

    (`jit_compile=False` runs a TensorFlow graph without XLA: a single
    short call is then faster; keep the default `True` for many calls.)

    References:
        - [Holtzman et al., 2020](https://arxiv.org/abs/1904.09751) (top-p sampling)
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7 (length penalty)
    """
    vocabulary_size = model.vocabulary_size
    end_id = check_token_id(
        "end_id",
        end_id,
        vocabulary_size,
        required=method == "beam",
        why=" for beam search, which finishes hypotheses at the end token",
    )
    options = GenerationOptions(
        **search_arguments(locals()),
        end_id=end_id,
        pad_id=model.pad_id,
        vocabulary_size=vocabulary_size,
    )
    prompt, prompt_lengths = token_matrix("prompt", prompt, model.pad_id)
    real = prompt != model.pad_id
    if prompt_lengths.min() < 1 or np.any(real[:, 1:] & ~real[:, :-1]):
        raise ValueError(
            "`prompt` must be right-padded with `pad_id` and every row must hold at least "
            f"one token (pad_id={model.pad_id}): a row's tokens first, then padding."
        )
    limits = _length_limits(prompt_lengths, max_length, learned_position_limit(model))
    cache_length = bucket_length(int(limits.max()) - 1, learned_position_limit(model))
    # The last column is never fed: a row of length `limit` needs `limit - 1` cache slots.
    sequences = np.full((prompt.shape[0], cache_length + 1), model.pad_id, "int32")
    width = min(prompt.shape[1], cache_length + 1)
    sequences[:, :width] = prompt[:, :width]
    prefill = prefill_bucket(int(prompt_lengths.min()) - 1)
    return run_generation(
        model,
        ("lm", prefill),
        lambda: make_search_fn(options, prefill),
        jit_compile,
        (sequences, prompt_lengths, limits.astype("int32")),
        options,
        first_column=0,
        return_scores=return_scores,
    )


def _length_limits(prompt_lengths, max_length, position_limit):
    """Each row's total length (prompt included), within a learned position table."""
    if max_length is None:
        limits = prompt_lengths + EXTRA_LENGTH
        if position_limit is not None and prompt_lengths.max() > position_limit:
            raise ValueError(
                f"`prompt` leaves no room to generate: max_sequence_length={position_limit}."
            )
    else:
        max_length = check_positive_int("max_length", max_length)
        if max_length <= prompt_lengths.max():
            raise ValueError(
                "`max_length` counts the prompt too, so it must exceed the longest prompt "
                f"({prompt_lengths.max()} tokens). Received: max_length={max_length}."
            )
        limits = np.full_like(prompt_lengths, max_length)
    # A row of length `limit` is fed `limit - 1` tokens, at as many positions.
    positions = fit_to_positions(
        limits - 1,
        position_limit,
        max_length,
        f"`max_length` ({max_length}) exceeds what the model's learned position "
        f"table allows (max_sequence_length={position_limit}). Pass "
        f"max_length<={None if position_limit is None else position_limit + 1}.",
    )
    return positions + 1
