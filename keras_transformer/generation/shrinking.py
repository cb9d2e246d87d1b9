"""Decoding loops whose batch halves as its inputs finish."""

import keras
from keras import ops


def batch_sizes(batch_size):
    """The batch sizes a shrinking loop runs at: halving, down to 4 inputs, 4 sizes at most.

    Each size is one more copy of the decoder in the compiled program; a fifth
    size would save little (most batches are down to a few long inputs by then).
    A batch of unknown size (an exported signature) keeps its size.
    """
    if not isinstance(batch_size, int):
        return [batch_size]
    sizes = [batch_size]
    while len(sizes) < 4 and (sizes[-1] + 1) // 2 >= 4:
        sizes.append((sizes[-1] + 1) // 2)
    return sizes


def take_rows(nest, inputs, rows_per_input=1):
    """The rows of `inputs` (int32 `(n,)`) in a nest with `rows_per_input` adjacent rows each."""
    if rows_per_input > 1:
        offsets = ops.arange(rows_per_input, dtype="int32")
        inputs = ops.reshape(inputs[:, None] * rows_per_input + offsets, (-1,))
    return keras.tree.map_structure(lambda t: ops.take(t, inputs, axis=0), nest)


def shrinking_loop(loop, index, state, rows_per_input, results_of, sizes):
    """Runs `loop` at each of `sizes`, dropping finished inputs between them.

    Args:
        loop: callable `(index, state, fewest) -> (index, state)`, a loop that
            steps while more than `fewest` inputs are unfinished.
        index: scalar int tensor, the first step.
        state: tuple of nests (`None` allowed), each with `rows_per_input[i]`
            adjacent rows per input on its leading axis; the last is `done`,
            bool `(inputs,)`.
        rows_per_input: tuple of ints, one per item of `state`.
        results_of: callable `state -> tuple` of per-input result tensors.
        sizes: the batch sizes, `batch_sizes(...)`.

    Returns:
        `(index, results)`: the step the last loop reached, and `results_of`
        for every input of the full batch, each at its own row.
    """
    if len(sizes) == 1:
        index, state = loop(index, state, 0)
        return index, results_of(state)
    results = results_of(state)
    rows = ops.arange(sizes[0], dtype="int32")
    for size, next_size in zip(sizes, sizes[1:] + [0]):
        index, state = loop(index, state, next_size)
        results = tuple(
            ops.scatter_update(result, rows[:, None], new)
            for result, new in zip(results, results_of(state))
        )
        if next_size:
            # The unfinished inputs first, in batch order (a distinct key each).
            order = ops.cast(ops.logical_not(state[-1]), "int32") * size
            _, kept = ops.top_k(order - ops.arange(size, dtype="int32"), next_size)
            kept = ops.cast(kept, "int32")
            rows = ops.take(rows, kept, axis=0)
            state = tuple(
                None if nest is None else take_rows(nest, kept, per_input)
                for nest, per_input in zip(state, rows_per_input)
            )
    return index, results
