"""What both models' `generate` share: argument checks, the search dispatch, the outputs."""

import random

import numpy as np
from keras import ops

from keras_transformer.generation.beam import beam_search
from keras_transformer.generation.compiled import compiled_function
from keras_transformer.generation.greedy import greedy_search
from keras_transformer.generation.sampling import greedy_choice, sample_choice
from keras_transformer.validation import check_positive_int, is_int, is_real

METHODS = ("greedy", "top_k", "top_p", "beam")


def check_token_id(name, value, vocabulary_size, required=True, why=""):
    """An int id in `[0, vocabulary_size)`, or `None` when not `required`."""
    if value is None:
        if required:
            raise ValueError(f"`{name}` is required{why}. Pass the token id, e.g. `{name}=2`.")
        return None
    if not is_int(value) or not 0 <= value < vocabulary_size:
        raise ValueError(
            f"`{name}` must be a token id in [0, {vocabulary_size}). Received: {name}={value!r}."
        )
    return int(value)


def token_matrix(name, ids, pad_id):
    """`ids` as an int32 numpy `(batch, length)` array and each row's non-pad count."""
    if hasattr(ids, "numpy") or not isinstance(ids, np.ndarray):
        ids = np.asarray(ops.convert_to_numpy(ids))
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(
            f"`{name}` must be a non-empty int tensor of shape `(batch, length)`. "
            f"Received: {name}.shape={ids.shape}."
        )
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"`{name}` must hold int token ids. Received dtype {ids.dtype}.")
    ids = ids.astype("int32")
    return ids, (ids != pad_id).sum(axis=1).astype("int32")


# The arguments of `generate` that choose the search, as its caller names them.
SEARCH_ARGUMENTS = (
    "method",
    "beam_size",
    "length_penalty",
    "num_return_sequences",
    "top_k",
    "top_p",
    "temperature",
    "seed",
)


def search_arguments(arguments):
    """The search arguments out of a `generate` function's arguments (its `locals()`)."""
    return {name: arguments[name] for name in SEARCH_ARGUMENTS}


class GenerationOptions:
    """The checked search arguments of a `generate` call (not public).

    `static` holds what changes the traced program (part of the compile key);
    `runtime` holds the seed, the float arguments and the end id, passed to the
    compiled function as tensors so that changing them does not recompile.
    """

    def __init__(
        self,
        *,
        method,
        beam_size,
        length_penalty,
        num_return_sequences,
        top_k,
        top_p,
        temperature,
        seed,
        end_id,
        pad_id,
        vocabulary_size,
    ):
        if method not in METHODS:
            raise ValueError(
                f"`method` must be one of {', '.join(map(repr, METHODS))}. "
                f"Received: method={method!r}."
            )
        check_positive_int("beam_size", beam_size)
        check_positive_int("num_return_sequences", num_return_sequences)
        if method == "beam" and num_return_sequences > beam_size:
            raise ValueError(
                "`num_return_sequences` must be at most `beam_size`: beam search keeps "
                f"only `beam_size` finished hypotheses. Received: num_return_sequences="
                f"{num_return_sequences}, beam_size={beam_size}."
            )
        if method == "greedy" and num_return_sequences != 1:
            raise ValueError(
                "`num_return_sequences` must be 1 with `method='greedy'` (every copy would "
                "be the same); use `method='beam'` or sampling. Received: "
                f"num_return_sequences={num_return_sequences}."
            )
        if not is_real(length_penalty):
            raise ValueError(
                f"`length_penalty` must be a number. Received: length_penalty={length_penalty!r}."
            )
        if method == "top_k":
            check_positive_int("top_k", top_k)
            top_k = min(int(top_k), vocabulary_size)
        if method == "top_p" and (not is_real(top_p) or not 0 < top_p <= 1):
            raise ValueError(f"`top_p` must be a float in (0, 1]. Received: top_p={top_p!r}.")
        if not is_real(temperature) or not temperature > 0:
            raise ValueError(
                f"`temperature` must be a positive number. Received: temperature={temperature!r}."
            )
        if seed is None:
            seed = random.randrange(2**31 - 1)  # follows keras.utils.set_random_seed
        elif not is_int(seed) or not 0 <= seed < 2**31:
            raise ValueError(
                f"`seed` must be an int in [0, 2**31) or None. Received: seed={seed!r}."
            )
        self.method = method
        self.beam_size = beam_size if method == "beam" else 1
        self.num_return_sequences = num_return_sequences
        self.pad_id = pad_id
        self.top_k = top_k if method == "top_k" else None
        self.static = (method, self.beam_size, num_return_sequences, self.top_k, pad_id)
        self.runtime = (
            np.asarray([seed, 0], "int32"),
            np.asarray(temperature, "float32"),
            np.asarray(top_p if method == "top_p" else 1.0, "float32"),
            np.asarray(length_penalty, "float32"),
            np.asarray(-1 if end_id is None else end_id, "int32"),  # -1 matches no token
        )

    @property
    def copies(self):
        """Rows the decoder runs per input: beams, or independent samples."""
        return self.beam_size if self.method == "beam" else self.num_return_sequences


def _never_pad(step_fn, pad_id, end_id):
    """Wraps `step_fn` so that `pad_id` gets `-inf` (unless it is also the end token).

    A generated pad token would be indistinguishable from the padding after a
    sequence, and a model never learns to predict it (its targets are masked).
    """

    def step(token_ids, cache, index, *context):
        logits, cache = step_fn(token_ids, cache, index, *context)
        vocabulary = ops.arange(logits.shape[-1], dtype="int32")
        banned = ops.logical_and(vocabulary == pad_id, ops.not_equal(end_id, pad_id))
        return ops.where(banned[None, :], float("-inf"), ops.cast(logits, "float32")), cache

    return step


def run_search(
    options, runtime, step_fn, cache, sequences, prompt_lengths, limits, start_index=0, context=None
):
    """Runs the search `options.method` (inside the compiled function).

    `cache` and `step_fn` work on `batch * options.copies` rows (each input's
    copies adjacent); `sequences`, `prompt_lengths` and `limits` are per input,
    and so is `context` (`None` or a nest), which `step_fn` then takes as a
    fourth argument. Beam and greedy search drop finished inputs from the batch
    as they go.

    Returns:
        `(sequences (batch, copies_returned, length), scores, num_columns)`.
    """
    seed, temperature, top_p, length_penalty, end_id = runtime
    step_fn = _never_pad(step_fn, options.pad_id, end_id)
    if options.method == "beam":
        return beam_search(
            step_fn,
            cache,
            sequences,
            prompt_lengths,
            limits,
            beam_size=options.beam_size,
            end_id=end_id,
            length_penalty=length_penalty,
            num_return_sequences=options.num_return_sequences,
            start_index=start_index,
            pad_id=options.pad_id,
            context=context,
            shrink_batch=True,
        )
    copies = options.copies
    if options.method == "greedy":

        def choose(logits, index):
            return greedy_choice(logits)

    else:
        top_p = top_p if options.method == "top_p" else None

        def choose(logits, index):
            return sample_choice(logits, seed, index, temperature, options.top_k, top_p)

    if copies > 1:
        sequences = ops.repeat(sequences, copies, axis=0)
        prompt_lengths = ops.repeat(prompt_lengths, copies, axis=0)
        limits = ops.repeat(limits, copies, axis=0)
    sequences, log_probs, num_columns = greedy_search(
        step_fn,
        cache,
        sequences,
        prompt_lengths,
        limits,
        start_index=start_index,
        choose_fn=choose,
        end_id=end_id,
        pad_id=options.pad_id,
        context=context,
        # A sample depends on its row's place in the batch (one draw for all rows).
        shrink_batch=options.method == "greedy" and copies == 1,
    )
    batch_size = ops.shape(sequences)[0] // copies
    sequences = ops.reshape(sequences, (batch_size, copies, -1))
    return sequences, ops.reshape(log_probs, (batch_size, copies)), num_columns


def learned_position_limit(model):
    """How many positions the model's learned position table holds, or `None` (sinusoids)."""
    return model.max_sequence_length if model.position == "learned" else None


def fit_to_positions(positions, position_limit, max_length, too_long):
    """Each row's needed decoder `positions`, capped at a learned table's `position_limit`.

    A default budget (`max_length=None`) is capped quietly; an explicit
    `max_length` that needs more positions than the table holds raises
    `ValueError(too_long)` instead.
    """
    if position_limit is None or positions.max() <= position_limit:
        return positions
    if max_length is not None:
        raise ValueError(too_long)
    return np.minimum(positions, position_limit)


def run_generation(model, key, make_fn, jit_compile, inputs, options, first_column, return_scores):
    """Runs the model's compiled search for `key` on numpy `inputs`; numpy outputs.

    `make_fn()` builds the traceable search, called once per `key` and
    `options.static`; `inputs` are passed to it as tensors, then
    `options.runtime`.
    """
    function = compiled_function(model, key + options.static, make_fn, jit_compile)
    sequences, scores, num_columns = function(
        *(ops.convert_to_tensor(value) for value in inputs),
        tuple(ops.convert_to_tensor(value) for value in options.runtime),
    )
    return finish_outputs(
        sequences,
        scores,
        num_columns,
        first_column=first_column,
        squeeze=options.num_return_sequences == 1,
        return_scores=return_scores,
    )


def finish_outputs(sequences, scores, num_columns, first_column, squeeze, return_scores):
    """Numpy outputs: columns `first_column .. num_columns`, squeezed when one per input."""
    num_columns = int(ops.convert_to_numpy(num_columns))
    sequences = np.asarray(ops.convert_to_numpy(sequences))[:, :, first_column:num_columns]
    scores = np.asarray(ops.convert_to_numpy(scores))
    if squeeze:
        sequences, scores = sequences[:, 0], scores[:, 0]
    return (sequences, scores) if return_scores else sequences
