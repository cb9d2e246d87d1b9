"""A tiny `Seq2SeqTransformer` learns to reverse sequences exactly, decoding greedily."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models import Seq2SeqTransformer
from keras_transformer.training import LabelSmoothedCrossEntropy, MaskedAccuracy

pytestmark = [pytest.mark.backend_agnostic, pytest.mark.slow]

PAD, START, FIRST_SYMBOL = 0, 1, 2
NUM_SYMBOLS, LENGTH = 10, 6
VOCAB = FIRST_SYMBOL + NUM_SYMBOLS
STEPS_PER_ROUND, MAX_ROUNDS = 250, 12  # at most 3000 updates


def reversal_data(rng, count):
    source = rng.integers(FIRST_SYMBOL, VOCAB, (count, LENGTH)).astype("int32")
    target = source[:, ::-1].copy()
    decoder_inputs = np.concatenate([np.full((count, 1), START, "int32"), target[:, :-1]], 1)
    return {"encoder_token_ids": source, "decoder_token_ids": decoder_inputs}, target


def greedy_decode(model, source):
    """Feeds back the arg-max token, one position at a time.

    The decoder input keeps its full length (unfilled positions are padding), so one
    compiled `predict` serves every step; causality keeps the padding from reaching the
    position read out.
    """
    decoder_inputs = np.full((len(source), LENGTH), PAD, "int32")
    decoder_inputs[:, 0] = START
    for t in range(LENGTH):
        logits = model.predict(
            {"encoder_token_ids": source, "decoder_token_ids": decoder_inputs},
            batch_size=len(source),
            verbose=0,
        )
        next_tokens = np.argmax(logits[:, t], axis=-1).astype("int32")
        if t + 1 < LENGTH:
            decoder_inputs[:, t + 1] = next_tokens
        else:
            return np.concatenate([decoder_inputs[:, 1:], next_tokens[:, None]], axis=1)


def test_tiny_model_learns_to_reverse_sequences():
    rng = np.random.default_rng(0)
    features, labels = reversal_data(rng, 8192)
    held_out, held_out_labels = reversal_data(np.random.default_rng(1), 256)
    dataset = (
        tf.data.Dataset.from_tensor_slices((features, labels))
        .shuffle(8192, seed=0)
        .repeat()
        .batch(64, drop_remainder=True)
    )
    model = Seq2SeqTransformer(
        VOCAB,
        num_encoder_layers=2,
        num_decoder_layers=2,
        hidden_dim=64,
        num_heads=4,
        intermediate_dim=128,
        dropout=0.0,
        pad_id=PAD,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=LabelSmoothedCrossEntropy(0.0, pad_id=PAD),
        metrics=[MaskedAccuracy(PAD)],
    )

    exact_match, steps = 0.0, 0
    for _ in range(MAX_ROUNDS):
        model.fit(dataset, steps_per_epoch=STEPS_PER_ROUND, epochs=1, verbose=0)
        steps += STEPS_PER_ROUND
        decoded = greedy_decode(model, held_out["encoder_token_ids"])
        exact_match = np.mean(np.all(decoded == held_out_labels, axis=1))
        if exact_match == 1.0:
            break
    assert exact_match == 1.0, (
        f"{exact_match:.1%} of held-out sequences reversed exactly after {steps} steps"
    )
    # Teacher-forced arg-max over the whole sequence agrees.
    logits = model.predict(held_out, batch_size=256, verbose=0)
    np.testing.assert_array_equal(np.argmax(logits, axis=-1), held_out_labels)
