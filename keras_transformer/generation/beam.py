"""Beam search with alive and finished hypotheses and the GNMT length penalty."""

import keras
from keras import ops

from keras_transformer.generation.length_penalty import gnmt_length_penalty
from keras_transformer.generation.shrinking import batch_sizes, shrinking_loop, take_rows

_NEG_INF = float("-inf")


def _gather_beams(tensor, indices):
    """`tensor[b, indices[b, j]]` for `(batch, beams, ...)` tensor and `(batch, n)` indices."""
    expanded = ops.reshape(indices, tuple(ops.shape(indices)) + (1,) * (len(tensor.shape) - 2))
    return ops.take_along_axis(tensor, expanded, axis=1)


def beam_search(
    step_fn,
    cache,
    sequences,
    prompt_lengths,
    limits,
    beam_size,
    end_id,
    length_penalty=0.6,
    num_return_sequences=1,
    start_index=0,
    pad_id=0,
    context=None,
    shrink_batch=False,
):
    r"""Beam search over a static key/value cache, in one `while_loop`.

    Each input keeps `beam_size` alive hypotheses and the `beam_size` best
    finished ones. Every step scores all `beam_size × vocabulary` extensions in
    float32 log-probabilities, takes the best `2 × beam_size`, and splits them:
    extensions that end (the token is `end_id`, or the row reached its last
    column) and rank among the first `beam_size` become finished hypotheses,
    scored $\log P / \left((5 + \ell) / 6\right)^\alpha$ with $\alpha$ =
    `length_penalty` and $\ell$ the number of generated tokens including the end
    token (see [`gnmt_length_penalty`][keras_transformer.generation.gnmt_length_penalty]); the best
    `beam_size` others stay alive, and the cache rows are reordered after
    their parents by a gather on the batch × beam axis. The first step expands
    from a single live beam per input (the others start at `-inf`), so no two
    hypotheses are equal. An input stops once its `num_return_sequences`-th best
    finished score is at least what its best alive hypothesis could still
    reach: its log-probability over the largest penalty still possible
    (log-probabilities only fall as a hypothesis grows).

    Only ending extensions within the first `beam_size` become finished (as in
    Hugging Face's beam search): then `beam_size=1` with `length_penalty=0` is
    exactly greedy search.

    With `shrink_batch=True` (and a batch of static size, 8 or more), finished
    inputs leave the batch: once at most half of them are unfinished, the
    unfinished ones (with their cache rows and `context`) go on as a batch of
    half the size, down to 4 inputs. Each size is a loop of its own in the
    compiled program; the results are those of the full batch.

    Args:
        step_fn: callable `(token_ids (batch * beams, 1), cache, index) ->
            (logits (batch * beams, vocabulary) float32, cache)`, called with
            `context` as a fourth argument when that is given. The first step
            feeds one row per input (`batch` rows: its beams are all equal then).
        cache: nest of tensors with leading axis `batch * beam_size`, row
            `b * beam_size + j` for beam `j` of input `b` (all beams of an
            input equal at the start).
        sequences: int32 tensor `(batch, length)`, each input's prompt (for
            an encoder-decoder model, the start token) then `pad_id`.
        prompt_lengths: int32 tensor `(batch,)`, at least `start_index + 1`.
        limits: int32 tensor `(batch,)`, how many columns each input may fill.
        beam_size: int.
        end_id: int or scalar int tensor, the token that finishes a hypothesis
            (`-1` matches none: hypotheses then finish at their last column).
        length_penalty: float or scalar tensor, `alpha`. Defaults to `0.6`.
        num_return_sequences: int, at most `beam_size`. Defaults to `1`.
        start_index: int, the first column to feed (the cache holds the
            earlier ones). Defaults to `0`.
        pad_id: int. Defaults to `0`.
        context: `None` or a nest of tensors with leading axis `batch`, one
            row per input (shared by its beams and never reordered; e.g. an
            encoder's cross-attention keys and values). Defaults to `None`.
        shrink_batch: bool, drop finished inputs from the batch as described
            above. `step_fn` must then keep no per-row tensors of its own: only
            in `cache` and `context`. Defaults to `False`.

    Returns:
        `(sequences, scores, num_columns)`: int32
        `(batch, num_return_sequences, length)` finished hypotheses, best first;
        their float32 `(batch, num_return_sequences)` length-normalised scores;
        the number of columns the loop reached.

    Example:

    >>> import keras
    >>> from keras_transformer.generation import beam_search
    >>> # Next-token probabilities depend only on the current token (row).
    >>> table = keras.ops.log(keras.ops.convert_to_tensor(
    ...     [[.01, .04, .55, .4], [.25, .25, .25, .25], [.05, .8, .05, .1], [.05, .9, .03, .02]]))
    >>> def step_fn(token_ids, cache, index):
    ...     return keras.ops.take(table, token_ids[:, 0], axis=0), cache
    >>> ids, scores, _ = beam_search(step_fn, keras.ops.zeros((2,)), [[0, 0, 0]], [1], [3],
    ...                              beam_size=2, end_id=1, length_penalty=0.0)
    >>> keras.ops.convert_to_numpy(ids).tolist()  # 0 2 1 (0.55 * 0.8) beats 0 3 1 (0.4 * 0.9)
    [[[0, 2, 1]]]

    References:
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7
    """
    sequences = ops.cast(sequences, "int32")
    batch_size, length = ops.shape(sequences)[0], ops.shape(sequences)[1]
    beams = beam_size
    # 2 × beams candidates leave `beams` alive even if `beams` of them end.
    num_candidates = 2 * beams
    alpha = ops.cast(length_penalty, "float32")
    end_id = ops.cast(end_id, "int32")

    def step(index, state, first=False):
        prompt_lengths, limits, context, alive, alive_log_probs, cache, finished, scores, done = (
            state
        )
        rows = ops.shape(alive)[0]
        log_probs, cache = _beam_log_probs(step_fn, alive, cache, index, context, first)
        vocabulary_size = log_probs.shape[-1]
        next_index = index + 1
        in_prompt = next_index < prompt_lengths
        log_probs = _force_prompt(log_probs, alive, next_index, in_prompt)

        totals = alive_log_probs[:, :, None] + log_probs
        totals = ops.reshape(totals, (rows, beams * vocabulary_size))
        top_log_probs, top_indices = _top_k(totals, min(num_candidates, beams * vocabulary_size))
        parents = top_indices // vocabulary_size
        top_tokens = top_indices % vocabulary_size
        candidates = _gather_beams(alive, parents)
        candidates = ops.slice_update(candidates, [0, 0, next_index], top_tokens[:, :, None])

        generated_length = ops.maximum(next_index - prompt_lengths + 1, 1)
        ends = ops.logical_or(ops.equal(top_tokens, end_id), (next_index + 1 >= limits)[:, None])
        ends = ops.logical_and(ends, ops.logical_not(in_prompt)[:, None])
        ranks = ops.arange(ops.shape(top_tokens)[1], dtype="int32")[None, :]
        new_finished = ops.logical_and(ends, ranks < beams)
        penalty = gnmt_length_penalty(generated_length, alpha)[:, None]
        new_finished_scores = ops.where(new_finished, top_log_probs / penalty, _NEG_INF)

        alive_log_probs, picked = ops.top_k(ops.where(ends, _NEG_INF, top_log_probs), beams)
        picked = ops.cast(picked, "int32")
        alive = _gather_beams(candidates, picked)
        parents = ops.take_along_axis(parents, picked, axis=1)
        if not first:  # after the first step every beam's cache rows are the same
            parents = ops.arange(rows, dtype="int32")[:, None] * beams + parents
            cache = take_rows(cache, ops.reshape(parents, (-1,)))

        pool_scores = ops.concatenate([scores, new_finished_scores], axis=1)
        pool = ops.concatenate([finished, candidates], axis=1)
        scores, picked = ops.top_k(pool_scores, beams)
        finished = _gather_beams(pool, ops.cast(picked, "int32"))

        # The best an alive hypothesis can still score: its log-probability (which only
        # falls) over the largest penalty of any length it can still reach.
        longest = ops.maximum(limits - prompt_lengths, 1)
        reachable_penalty = ops.maximum(
            gnmt_length_penalty(generated_length + 1, alpha), gnmt_length_penalty(longest, alpha)
        )
        best_alive = alive_log_probs[:, 0] / reachable_penalty
        settled = scores[:, num_return_sequences - 1] >= best_alive
        settled = ops.logical_and(settled, ops.logical_not(in_prompt))
        done = ops.logical_or(done, settled)
        state = (prompt_lengths, limits, context, alive, alive_log_probs, cache, finished)
        return next_index, (*state, scores, done)

    def loop(index, state, fewest):
        def cond(index, state):
            unfinished = ops.sum(ops.cast(ops.logical_not(state[-1]), "int32"))
            return ops.logical_and(index < length - 1, unfinished > fewest)

        return ops.while_loop(cond, step, (index, state))

    first_beam = ops.arange(beams, dtype="int32")[None, :] == 0
    state = (
        ops.cast(prompt_lengths, "int32"),
        ops.cast(limits, "int32"),
        () if context is None else (context,),  # what `step_fn` takes after its 3 arguments
        ops.repeat(sequences[:, None, :], beams, axis=1),
        ops.where(first_beam, ops.zeros((batch_size, beams)), _NEG_INF),
        cache,
        ops.full((batch_size, beams, length), pad_id, dtype="int32"),
        ops.full((batch_size, beams), _NEG_INF, dtype="float32"),
        ops.zeros((batch_size,), "bool"),
    )
    index = ops.convert_to_tensor(start_index, "int32")
    if beams > 1 and isinstance(length, int) and start_index < length - 1:
        index, state = step(index, state, first=True)
    index, (finished, scores) = shrinking_loop(
        loop,
        index,
        state,
        (1, 1, 1, 1, 1, beams, 1, 1, 1),
        lambda state: (state[6][:, :num_return_sequences], state[7][:, :num_return_sequences]),
        batch_sizes(batch_size) if shrink_batch else [batch_size],
    )
    return finished, scores, index + 1


def _beam_log_probs(step_fn, alive, cache, index, context, first):
    """Runs `step_fn` on every beam's token at `index`: float32 log-probabilities
    `(rows, beams, vocabulary)` of the next token, and the updated cache."""
    rows, beams = ops.shape(alive)[0], alive.shape[1]
    if first:
        # The beams of an input are all equal at the start: the first step runs
        # the decoder on one of them and copies its logits and cache rows.
        tokens = ops.reshape(ops.slice(alive, [0, 0, index], [rows, 1, 1]), (rows, 1))
        first_beams = ops.arange(rows, dtype="int32") * beams
        logits, cache = step_fn(tokens, take_rows(cache, first_beams), index, *context)
        logits, cache = keras.tree.map_structure(
            lambda t: ops.repeat(t, beams, axis=0), (logits, cache)
        )
    else:
        tokens = ops.slice(alive, [0, 0, index], [rows, beams, 1])
        logits, cache = step_fn(ops.reshape(tokens, (rows * beams, 1)), cache, index, *context)
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    return ops.reshape(log_probs, (rows, beams, logits.shape[-1])), cache


def _force_prompt(log_probs, alive, next_index, in_prompt):
    """Inside a prompt every beam must take the prompt's token, at no cost: for the
    rows `in_prompt`, log-probability 0 for that token and -inf for the others."""
    prompt_token = ops.slice(alive, [0, 0, next_index], [ops.shape(alive)[0], 1, 1])
    vocabulary = ops.arange(log_probs.shape[-1], dtype="int32")[None, None, :]
    forced = ops.where(vocabulary == prompt_token, 0.0, _NEG_INF)
    return ops.where(in_prompt[:, None, None], forced, log_probs)


def _top_k(values, k, block=128):
    """`ops.top_k(values, k)` (int32 indices) for `(rows, width)` values, in two small steps.

    A sort-based top-k over a whole `beams × vocabulary` row costs a step several
    times what one pass does. The `k` largest values lie in the `k` blocks of
    `block` columns with the largest maxima (any other block's maximum is below
    them all), so one pass takes the blocks' maxima and the top-k runs over those
    blocks only. The blocks are taken in column order, so equal values still
    come lowest column first.
    """
    rows, width = ops.shape(values)[0], values.shape[1]
    blocks = -(-width // block)
    if blocks <= 4 * k:
        values, indices = ops.top_k(values, k)
        return values, ops.cast(indices, "int32")
    values = ops.pad(values, [[0, 0], [0, blocks * block - width]], constant_values=_NEG_INF)
    values = ops.reshape(values, (rows, blocks, block))
    _, top_blocks = ops.top_k(ops.max(values, axis=-1), k)
    top_blocks = ops.sort(ops.cast(top_blocks, "int32"), axis=-1)
    candidates = ops.take_along_axis(values, top_blocks[:, :, None], axis=1)
    top_values, picked = ops.top_k(ops.reshape(candidates, (rows, k * block)), k)
    picked = ops.cast(picked, "int32")
    indices = ops.take_along_axis(top_blocks, picked // block, axis=1) * block + picked % block
    return top_values, indices
