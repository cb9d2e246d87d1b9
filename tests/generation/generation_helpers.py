"""Tiny models and uncached reference decoders shared by the generation tests."""

import contextlib

import keras
import numpy as np

from tests import tiny_models

VOCABULARY_SIZE = 24
START, END = 1, 2

# XLA compiles a generation program in ~6 s on the 2-core test machine, a TensorFlow
# graph in ~3 s. Tests of search logic (not of compilation) use the graph on
# TensorFlow; JAX without jit would recompile its loop on every call, so it keeps jit.
LOGIC_JIT = keras.backend.backend() != "tensorflow"


@contextlib.contextmanager
def eager_loops():
    """Runs `keras.ops.while_loop` as a Python loop (no compilation of tiny test loops)."""
    if keras.backend.backend() == "jax":
        import jax

        with jax.disable_jit():
            yield
    else:
        yield


def set_numpy_weights(model, seed):
    """Weights from a NumPy generator: the same model on every backend.

    Backends draw different initial weights from the same Keras seed; tests that
    rely on a model's behaviour (varied outputs, end tokens at different steps)
    need the same model everywhere. Large learned positions keep a random
    model from repeating one token, so a wrong position, cache slot or beam
    reordering shows up as a different output.
    """
    rng = np.random.default_rng(seed)
    weights = []
    for variable in model.weights:
        shape, path = tuple(variable.shape), variable.path
        if path.endswith("gamma"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif path.endswith(("beta", "bias")):
            value = 0.1 * rng.standard_normal(shape)
        elif "position_embedding" in path:
            value = 3.0 * rng.standard_normal(shape)
        elif "token_embedding" in path:
            value = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif "attention_output" in path:
            value = rng.standard_normal(shape) / np.sqrt(shape[0] * shape[1])
        else:
            value = rng.standard_normal(shape) / np.sqrt(shape[0])
        weights.append(value.astype("float32"))
    model.set_weights(weights)
    return model


# No dropout: generation is deterministic. Learned positions: `set_numpy_weights` makes
# them large, which keeps a random model from repeating one token.
GENERATION_OPTIONS = dict(
    dropout=0.0, position="learned", max_sequence_length=64, tie_output_embeddings=False
)


def tiny_seq2seq(num_decoder_layers=1, seed=6):
    model = tiny_models.seq2seq(
        VOCABULARY_SIZE, num_decoder_layers=num_decoder_layers, **GENERATION_OPTIONS
    )
    return set_numpy_weights(model, seed)


def tiny_lm(seed=4, **overrides):
    model = tiny_models.lm(VOCABULARY_SIZE, num_layers=2, **GENERATION_OPTIONS, **overrides)
    return set_numpy_weights(model, seed)


def pad_rows(rows, width=None, pad_id=0):
    width = width or max(len(r) for r in rows)
    out = np.full((len(rows), width), pad_id, "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


_JITTED_CALLS = {}


def forward(model, inputs):
    """`model(inputs)` as float64 numpy, with the model's current weights.

    On JAX an eager call compiles every op for every new shape; one jitted
    `stateless_call` per model (weights passed as arguments) is much faster.
    """
    if keras.backend.backend() != "jax":
        # `convert_to_numpy` rather than `np.asarray`: it detaches a PyTorch result,
        # which requires grad outside `torch.no_grad()`.
        return keras.ops.convert_to_numpy(model(inputs)).astype("float64")
    import jax

    if id(model) not in _JITTED_CALLS:
        _JITTED_CALLS[id(model)] = (model, jax.jit(model.stateless_call))
    _, call = _JITTED_CALLS[id(model)]
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    outputs, _ = call(trainable, non_trainable, inputs)
    return np.asarray(outputs, "float64")


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


SOURCES = [[5, 6, 7, 8, 9, 10, 11], [9, 10, 3], [4, 12, 13, 14, 15]]


def uncached_greedy_seq2seq(model, source, max_new_tokens, start_id=START, end_id=END):
    """Greedy decoding by re-running the full model on the growing prefix (no cache)."""
    prefix, log_prob = [start_id], 0.0
    for _ in range(max_new_tokens):
        # The whole prefix, padded to one width (causal attention never looks at the
        # padding after it), so eager JAX does not compile every op for every length.
        decoder_ids = np.full((1, max_new_tokens), model.pad_id, "int32")
        decoder_ids[0, : len(prefix)] = prefix
        inputs = {"encoder_token_ids": np.asarray([source]), "decoder_token_ids": decoder_ids}
        logits = forward(model, inputs)[0, len(prefix) - 1]
        logits[model.pad_id] = -np.inf  # generation never emits padding
        log_probs = log_softmax(logits)
        token = int(np.argmax(log_probs))
        log_prob += log_probs[token]
        prefix.append(token)
        if token == end_id:
            break
    return prefix[1:], log_prob


def uncached_greedy_lm(model, prompt, max_length, end_id=None):
    sequence = list(prompt)
    while len(sequence) < max_length:
        padded = np.full((1, max_length), model.pad_id, "int32")
        padded[0, : len(sequence)] = sequence
        logits = forward(model, padded)[0, len(sequence) - 1]
        logits[model.pad_id] = -np.inf
        token = int(np.argmax(logits))
        sequence.append(token)
        if token == end_id:
            break
    return sequence


def _padded(tokens, width, pad_id):
    # Fixed widths keep the number of distinct shapes (compilations on JAX) small;
    # causal attention never looks at the padding after the tokens.
    width = max(width, len(tokens))
    return np.asarray([list(tokens) + [pad_id] * (width - len(tokens))], "int32")


def sequence_log_prob(model, source, target, start_id=START, width=64):
    """Log-probability of `target` (generated tokens) given `source`, by one full pass."""
    inputs = {
        "encoder_token_ids": _padded(source, 12, model.pad_id),
        "decoder_token_ids": _padded([start_id] + list(target[:-1]), width, model.pad_id),
    }
    logits = forward(model, inputs)[0]
    logits[:, model.pad_id] = -np.inf
    log_probs = log_softmax(logits)
    return float(sum(log_probs[i, t] for i, t in enumerate(target)))


def continuation_log_prob(model, prompt, continuation):
    """Log-probability of `continuation` after `prompt` under a `TransformerLM`, one pass."""
    sequence = list(prompt) + list(continuation)
    logits = forward(model, _padded(sequence[:-1], 16, model.pad_id))[0]
    logits[:, model.pad_id] = -np.inf
    log_probs = log_softmax(logits)
    start = len(prompt) - 1
    return float(sum(log_probs[start + i, t] for i, t in enumerate(continuation)))


def strip(row, pad_id=0):
    """A generated row without its trailing padding."""
    row = list(np.asarray(row))
    while row and row[-1] == pad_id:
        row.pop()
    return row
