"""Tiny instances of the four models, with matching inputs, labels, loss and metric."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_transformer.training import LabelSmoothedCrossEntropy, MaskedAccuracy
from tests import tiny_models

VOCAB = 23
NUM_CLASSES = 3
SIZES = tiny_models.SIZES
SOURCE_LENGTH, TARGET_LENGTH = 7, 5
# Where one training step is all a test needs: eager on TensorFlow, where tracing a step
# costs seconds and an eager step a fraction of one; compiled on JAX, where eager runs
# compile every op for every new shape and dtype, which costs more than one `jit`.
EAGER_STEP = keras.backend.backend() == "tensorflow"


def _jax_on_cpu():
    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.devices()[0].platform == "cpu"


JAX_ON_CPU = _jax_on_cpu()


def token_ids(rng, shape, pad_id=0):
    """Random non-pad token ids in `[0, VOCAB)`."""
    ids = rng.integers(0, VOCAB - 1, shape)
    return np.where(ids >= pad_id, ids + 1, ids).astype("int32")


def make_seq2seq(**kwargs):
    return tiny_models.seq2seq(VOCAB, **kwargs)


def make_classifier(num_classes=NUM_CLASSES, **kwargs):
    return tiny_models.classifier(VOCAB, num_classes, **kwargs)


def make_lm(**kwargs):
    return tiny_models.lm(VOCAB, **kwargs)


def make_masked_lm(**kwargs):
    return tiny_models.masked_lm(VOCAB, **kwargs)


def seq2seq_data(rng, batch=8, pad_id=0):
    x = {
        "encoder_token_ids": token_ids(rng, (batch, SOURCE_LENGTH), pad_id),
        "decoder_token_ids": token_ids(rng, (batch, TARGET_LENGTH), pad_id),
    }
    # Trailing padding in the labels exercises the loss's mask.
    y = token_ids(rng, (batch, TARGET_LENGTH), pad_id)
    y[:, -1] = pad_id
    return x, y


def classifier_data(rng, batch=8, pad_id=0):
    x = {"token_ids": token_ids(rng, (batch, SOURCE_LENGTH), pad_id)}
    return x, rng.integers(0, NUM_CLASSES, (batch,)).astype("int32")


def lm_data(rng, batch=8, pad_id=0):
    ids = token_ids(rng, (batch, TARGET_LENGTH + 1), pad_id)
    return {"token_ids": ids[:, :-1]}, ids[:, 1:]


def masked_lm_data(rng, batch=8, pad_id=0, num_predictions=2):
    """Token ids with `num_predictions` ascending positions per row, labelled with their tokens.

    Every other row uses one slot only: the unused one points at position 0 with label
    `pad_id`, as `mask_tokens` makes them, which exercises the loss's mask.
    """
    ids = token_ids(rng, (batch, SOURCE_LENGTH), pad_id)
    positions = np.sort(
        np.stack([rng.choice(SOURCE_LENGTH, num_predictions, replace=False) for _ in range(batch)]),
        axis=1,
    ).astype("int32")
    labels = np.take_along_axis(ids, positions, axis=1)
    positions[1::2, 1:] = 0
    labels[1::2, 1:] = pad_id
    return {"token_ids": ids, "mask_positions": positions}, labels


@dataclasses.dataclass(frozen=True)
class ModelCase:
    name: str
    make: object
    data: object
    sequence_output: bool  # per-token logits (label-smoothed loss) or per-example

    def compile_args(self, pad_id=0):
        if self.sequence_output:
            return dict(
                loss=LabelSmoothedCrossEntropy(0.1, pad_id=pad_id),
                metrics=[MaskedAccuracy(pad_id)],
            )
        return dict(
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )


CASES = [
    ModelCase("seq2seq", make_seq2seq, seq2seq_data, True),
    ModelCase("classifier", make_classifier, classifier_data, False),
    ModelCase("lm", make_lm, lm_data, True),
    ModelCase("masked_lm", make_masked_lm, masked_lm_data, True),
]

# The cases a test over every model runs on this backend. TensorFlow, the default, runs all
# four; JAX and PyTorch run the two whose code can take another path there: the
# encoder-decoder (every layer class, cross-attention, the tied output projection) and the
# masked LM (its head gathers the masked positions). The classifier's pooling and the LM's
# decoder-only stack are checked on every backend where they are computed
# (test_pooling_values.py, tests/reference/test_invariances.py).
BACKEND_CASES = (
    CASES
    if keras.backend.backend() == "tensorflow"
    else [case for case in CASES if case.name in ("seq2seq", "masked_lm")]
)
BY_NAME = pytest.mark.parametrize("case", BACKEND_CASES, ids=[c.name for c in BACKEND_CASES])


def compile_model(model, case, optimizer=None, pad_id=0, **kwargs):
    """Compiles with the case's loss and metric and builds the optimizer up front.

    A TensorFlow `fit` that creates the optimizer slots inside its traced step traces it
    twice; building them first halves the cost of each test's first step.
    """
    model.compile(
        optimizer=optimizer or keras.optimizers.Adam(1e-3), **case.compile_args(pad_id), **kwargs
    )
    model.optimizer.build(model.trainable_variables)
    return model


def predict_logits(model, x):
    """Inference-mode logits as a NumPy array.

    Eager on TensorFlow (cheaper than tracing); the compiled `predict` on JAX, whose eager
    mode compiles every op for every new input shape, which costs more than one `jit`.
    """
    if keras.backend.backend() == "jax":
        return model.predict(x, batch_size=64, verbose=0)
    return np.asarray(keras.ops.convert_to_numpy(model(x, training=False)))
