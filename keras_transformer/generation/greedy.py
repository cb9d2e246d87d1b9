"""The one-hypothesis-per-row decoding loop shared by greedy search and sampling."""

from keras import ops

from keras_transformer.generation.shrinking import batch_sizes, shrinking_loop


def _column(sequences, index):
    """Column `index` (a scalar tensor) of `(rows, length)` ids, as `(rows, 1)`."""
    return ops.slice(sequences, [0, index], [ops.shape(sequences)[0], 1])


def greedy_search(
    step_fn,
    cache,
    sequences,
    prompt_lengths,
    limits,
    start_index=0,
    choose_fn=None,
    end_id=None,
    pad_id=0,
    context=None,
    shrink_batch=False,
):
    """Extends each row by one token a step, with a static key/value cache.

    Step `i` feeds column `i` of `sequences` to `step_fn` (the cache already
    holds columns `< i`) and writes column `i + 1`: the row's prompt token while
    the row is still inside its prompt, else the token picked by `choose_fn`
    (the argmax by default, which makes this greedy search). A row stops after
    it generates `end_id` or fills its last column (`limits - 1`); its later
    columns stay `pad_id`. The loop ends when every row has stopped.

    Args:
        step_fn: callable `(token_ids (rows, 1), cache, index) -> (logits
            (rows, vocabulary) float32, cache)`, called with `context` as a
            fourth argument when that is given.
        cache: the decoding state `step_fn` updates (any nest of tensors).
        sequences: int32 tensor `(rows, length)`, the prompt of each row at
            columns `< prompt_lengths`, `pad_id` after.
        prompt_lengths: int32 tensor `(rows,)`, at least `start_index + 1`.
        limits: int32 tensor `(rows,)`, how many columns each row may fill,
            at most `length`.
        start_index: int, the first column to feed; the cache must already
            hold the columns before it (a prefilled prompt). Defaults to `0`.
        choose_fn: callable `(logits, index) -> (rows,) int32`. Defaults to
            `None`: the argmax.
        end_id: int or scalar int tensor, the token that ends a row (`-1`
            matches none). Defaults to `None` (rows run to their limit).
        pad_id: int, the id written after a row stops. Defaults to `0`.
        context: `None` or a nest of tensors that `step_fn` takes as a fourth
            argument (e.g. an encoder's cross-attention keys and values).
            Defaults to `None`.
        shrink_batch: bool, drop finished rows from the batch (of static size,
            8 or more): once at most half of the rows are unfinished, those
            (with their cache and `context` rows, one per row) go on as a batch
            of half the size, down to 4 rows; `choose_fn` must treat each row
            on its own and `step_fn` keep no per-row tensors outside `cache`
            and `context`. The results are those of the full batch. Defaults
            to `False`.

    Returns:
        `(sequences, log_probs, num_columns)`: the filled `(rows, length)` ids,
        the float32 `(rows,)` sum of the log-probabilities of the generated
        tokens under `step_fn`'s logits (before any filtering or temperature
        in `choose_fn`), and the number of columns the loop reached (a scalar
        tensor); columns after it are `pad_id` in every row.

    Example:

    >>> import keras
    >>> from keras_transformer.generation import greedy_search
    >>> # A decoder whose next token is always (current + 1) % 5; 4 ends a row.
    >>> def step_fn(token_ids, cache, index):
    ...     return keras.ops.one_hot((token_ids[:, 0] + 1) % 5, 5) * 10.0, cache
    >>> ids, _, _ = greedy_search(step_fn, (), [[1, 0, 0, 0, 0]], [1], [5], end_id=4)
    >>> keras.ops.convert_to_numpy(ids).tolist()
    [[1, 2, 3, 4, 0]]
    """
    if choose_fn is None:

        def choose_fn(logits, index):
            return ops.cast(ops.argmax(logits, axis=-1), "int32")

    sequences = ops.cast(sequences, "int32")
    rows, length = ops.shape(sequences)[0], ops.shape(sequences)[1]
    pad = ops.cast(pad_id, "int32")

    def step(index, state):
        prompt_lengths, limits, context, sequences, cache, log_probs, done = state
        logits, cache = step_fn(_column(sequences, index), cache, index, *context)
        logits = ops.cast(logits, "float32")
        next_index = index + 1
        chosen = ops.cast(choose_fn(logits, index), "int32")
        in_prompt = next_index < prompt_lengths
        generated = ops.logical_and(ops.logical_not(in_prompt), ops.logical_not(done))
        token = ops.where(
            in_prompt, _column(sequences, next_index)[:, 0], ops.where(done, pad, chosen)
        )
        token_log_prob = ops.take_along_axis(
            ops.log_softmax(logits, axis=-1), chosen[:, None], axis=-1
        )[:, 0]
        log_probs = log_probs + ops.where(generated, token_log_prob, 0.0)
        sequences = ops.slice_update(sequences, [0, next_index], token[:, None])
        stops = next_index + 1 >= limits
        if end_id is not None:
            stops = ops.logical_or(stops, ops.equal(chosen, ops.cast(end_id, "int32")))
        done = ops.logical_or(done, ops.logical_and(generated, stops))
        return next_index, (prompt_lengths, limits, context, sequences, cache, log_probs, done)

    def loop(index, state, fewest):
        def cond(index, state):
            unfinished = ops.sum(ops.cast(ops.logical_not(state[-1]), "int32"))
            return ops.logical_and(index < length - 1, unfinished > fewest)

        return ops.while_loop(cond, step, (index, state))

    state = (
        ops.cast(prompt_lengths, "int32"),
        ops.cast(limits, "int32"),
        () if context is None else (context,),  # what `step_fn` takes after its 3 arguments
        sequences,
        cache,
        ops.zeros((rows,), "float32"),
        ops.zeros((rows,), "bool"),
    )
    index, (sequences, log_probs) = shrinking_loop(
        loop,
        ops.convert_to_tensor(start_index, "int32"),
        state,
        (1,) * len(state),
        lambda state: (state[3], state[5]),
        batch_sizes(rows) if shrink_batch else [rows],
    )
    return sequences, log_probs, index + 1
