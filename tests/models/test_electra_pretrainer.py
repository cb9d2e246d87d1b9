"""`ElectraPretrainer`: the model contract, the replacements, the labels, the joint loss.

The contract every model keeps (config, `.keras` saving, fit, mixed precision) runs here
through `test_model_common`'s tests, with the ELECTRA model as one more case.
"""

import dataclasses

import keras
import numpy as np
import pytest
import test_model_common as common
from model_cases import (
    EAGER_STEP,
    SIZES,
    VOCAB,
    ModelCase,
    masked_lm_data,
    predict_logits,
    token_ids,
)

from keras_transformer.models import ElectraPretrainer, TransformerClassifier, build
from keras_transformer.saving import load_pretrained, save_pretrained
from keras_transformer.training import MaskedAccuracy

PAD = 0


def make_electra(**kwargs):
    return ElectraPretrainer(VOCAB, **{"num_layers": 1, **SIZES, **kwargs})


@dataclasses.dataclass(frozen=True)
class ElectraCase(ModelCase):
    def compile_args(self, pad_id=0):
        return dict(loss=None, metrics=[MaskedAccuracy(pad_id)])


ELECTRA = ElectraCase("electra", make_electra, masked_lm_data, True)


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


@pytest.mark.backend_agnostic
def test_the_model_contract(rng, tmp_path):
    # `test_model_common`'s tests, called with this model's case; its `fit` on arrays and
    # datasets runs the same trainer as `MaskedLM`'s, the loss aside (trained below).
    common.test_config_json_round_trip(ELECTRA)
    common.test_keras_save_and_load_without_custom_objects(ELECTRA, rng, tmp_path)


def _every_weight_trains(model, rng, **compile_kwargs):
    x, y = masked_lm_data(rng)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=None, **compile_kwargs)
    before = [np.array(w) for w in model.trainable_weights]
    logs = model.fit(x, y, batch_size=8, epochs=1, verbose=0).history
    assert all(np.isfinite(logs[name][0]) for name in logs), logs
    names = ["discriminator_accuracy", "discriminator_loss", "generator_loss", "loss"]
    assert sorted(logs) == names
    results = model.evaluate(x, y, verbose=0, return_dict=True)
    assert sorted(results) == names and all(np.isfinite(v) for v in results.values())
    # Both losses train: the generator, the discriminator and the shared embeddings move.
    for weight, old in zip(model.trainable_weights, before):
        assert not np.array_equal(old, np.array(weight)), weight.path


# TensorFlow only: on JAX its compiled steps took 22 s of a test budget of about 8 s for this
# module (the loss and replacements, computed with the same `keras.ops`, run on JAX above).
def test_mixed_precision_and_every_weight_trains(rng):
    common.test_mixed_precision_logits_are_float32_and_training_is_finite(
        ELECTRA, "mixed_bfloat16", rng
    )
    # Eager on TensorFlow (see `EAGER_STEP`); `test_every_weight_trains_under_xla` compiles.
    _every_weight_trains(make_electra(), rng, run_eagerly=EAGER_STEP)


@pytest.mark.slow
def test_every_weight_trains_under_xla(rng):
    _every_weight_trains(make_electra(), rng, jit_compile=keras.backend.backend() != "torch")


def _batch(rng, batch=6, length=9, slots=3):
    """Masked-LM batches as `mask_tokens` makes them: ascending positions, unused slots at 0."""
    ids = token_ids(rng, (batch, length))
    ids[:, 0], ids[1, -3:] = 2, PAD  # a start id, and padding in one row
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, 6), slots, replace=False) for _ in range(batch)]), 1
    ).astype("int32")
    labels = np.take_along_axis(ids, positions, axis=1)
    positions[2, 1:], labels[2, 1:] = 0, PAD  # one used slot
    positions[3], labels[3] = 0, PAD  # a row that predicts nothing
    masked = ids.copy()
    np.put_along_axis(masked, positions, 4, axis=1)
    masked[:, 0] = ids[:, 0]
    return {"token_ids": masked, "mask_positions": positions}, labels, ids


@pytest.mark.backend_agnostic
def test_replacements_fall_only_on_masked_positions_and_labels_mark_them(rng):
    model = make_electra()
    x, labels, original = _batch(rng, batch=16)
    # Logits that favour the padding id, the original token or another one, by row.
    logits = rng.normal(0.0, 1.0, labels.shape + (VOCAB,)).astype("float32")
    logits[..., PAD] += 40.0  # never sampled however likely
    sure = np.take_along_axis(logits, labels[..., None], axis=-1)
    np.put_along_axis(
        logits, labels[..., None], sure + 40.0 * (np.arange(16) % 2)[:, None, None], -1
    )
    replaced_ids, is_replaced = model.replace_tokens(
        x["token_ids"], x["mask_positions"], labels, logits
    )
    replaced_ids, is_replaced = _numpy(replaced_ids), _numpy(is_replaced)

    used = np.zeros(original.shape, bool)
    for row, (positions, row_labels) in enumerate(zip(x["mask_positions"], labels)):
        used[row, positions[row_labels != PAD]] = True
    np.testing.assert_array_equal(replaced_ids[~used], x["token_ids"][~used])
    assert not np.any(replaced_ids[used] == PAD)
    # Exactly the tokens that differ from the original text are labelled replaced; a sample
    # equal to the original (the odd rows, where the generator is sure of it) is original.
    np.testing.assert_array_equal(is_replaced, used & (replaced_ids != original))
    np.testing.assert_array_equal(replaced_ids[1::2][used[1::2]], original[1::2][used[1::2]])
    assert is_replaced[::2].sum() > 0.8 * used[::2].sum()


def _bce(logits, targets):
    return np.maximum(logits, 0) - logits * targets + np.log1p(np.exp(-np.abs(logits)))


@pytest.mark.backend_agnostic
def test_joint_loss_equals_numpy_on_a_hand_built_batch(rng):
    model = make_electra(dropout=0.0, discriminator_weight=7.0)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    # The generator is sure of token 7: every used slot gets it.
    bias = np.zeros(VOCAB, "float32")
    bias[7] = 60.0
    model.output_bias.assign(bias)
    x, labels, original = _batch(rng)
    labels[0, 0] = original[0, x["mask_positions"][0, 0]] = 7  # a sample equal to the original

    generator_logits = predict_logits(model, x).astype("float64")
    loss = float(
        _numpy(
            model.compute_loss(
                x,
                labels,
                keras.ops.convert_to_tensor(generator_logits.astype("float32")),
                training=False,
            )
        )
    )

    used = labels != PAD
    log_probs = generator_logits - generator_logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    generator_loss = -picked[used].mean()
    replaced = x["token_ids"].copy()
    is_replaced = np.zeros(replaced.shape, bool)
    for row in range(len(replaced)):
        for position, label in zip(x["mask_positions"][row], labels[row]):
            if label != PAD:
                replaced[row, position] = 7
                is_replaced[row, position] = label != 7
    discriminator_logits = _numpy(model.discriminate(replaced)).astype("float64")
    weights = (x["token_ids"] != PAD) & used.any(axis=1)[:, None]
    assert not weights[3].any() and weights.sum() == 5 * 9 - 3
    discriminator_loss = _bce(discriminator_logits, is_replaced)[weights].mean()
    expected = generator_loss + 7.0 * discriminator_loss
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_the_discriminator_fine_tunes_and_saves(rng, tmp_path):
    model = make_electra(norm_first=True)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.2, weight.shape).astype("float32"))
    ids = token_ids(rng, (3, 7))
    ids[:, -2:] = PAD
    classifier = TransformerClassifier.from_encoder(model, num_classes=2)
    np.testing.assert_array_equal(_numpy(classifier.encoder(ids)), _numpy(model.encoder(ids)))
    assert not any("generator" in w.path or "discriminator" in w.path for w in classifier.weights)

    loaded = load_pretrained(save_pretrained(model, tmp_path / "electra")).model
    assert type(loaded) is ElectraPretrainer
    np.testing.assert_array_equal(_numpy(loaded.discriminate(ids)), _numpy(model.discriminate(ids)))


def test_build_and_bad_arguments():
    model = build(
        "replaced_token_detection",
        preset="tiny",
        vocabulary_size=VOCAB,
        num_layers=1,
        **SIZES,
        precision="float32",
    )
    assert type(model) is ElectraPretrainer and model.loss is None
    assert (model.generator_hidden_dim, model.generator_num_heads) == (4, 1)
    assert model.generator_intermediate_dim == 8
    with pytest.raises(ValueError, match="`generator_hidden_dim` \\(6\\) must be divisible"):
        make_electra(generator_hidden_dim=6, generator_num_heads=4)
    with pytest.raises(ValueError, match="`generator_num_layers` must be a positive"):
        make_electra(generator_num_layers=0)
    with pytest.raises(ValueError, match="`discriminator_weight` must be a positive number"):
        make_electra(discriminator_weight=0.0)
    with pytest.raises(ValueError, match="takes no `sample_weight`"):
        model.compute_loss({}, None, None, sample_weight=np.ones(2))
    with pytest.raises(ValueError, match="trains on masked-LM batches"):
        model.compute_loss(np.ones((2, 3), "int32"), np.ones((2, 1), "int32"), None)


def _progressions(rng, rows, length, vocabulary, mask_id, mask_rate=0.15):
    """Rows `[2, a, a+k, a+2k, ..., 3]` (mod the content ids) with a share masked.

    Every content token follows from its neighbours, so a replaced one breaks the
    pattern where it stands: a discriminator that uses the context spots it.
    """
    first, span = 5, vocabulary - 5
    start = rng.integers(0, span, (rows, 1))
    step = rng.integers(1, 4, (rows, 1))
    body = first + (start + step * np.arange(length - 2)) % span
    ids = np.concatenate([np.full((rows, 1), 2), body, np.full((rows, 1), 3)], 1)
    count = round(mask_rate * (length - 2))
    positions = np.sort(
        np.argsort(rng.random((rows, length - 2)), axis=1)[:, :count] + 1, axis=1
    ).astype("int32")
    labels = np.take_along_axis(ids, positions, axis=1).astype("int32")
    masked = ids.copy()
    np.put_along_axis(masked, positions, mask_id, axis=1)
    return {"token_ids": masked.astype("int32"), "mask_positions": positions}, labels


@pytest.mark.slow
@pytest.mark.backend_agnostic
def test_the_discriminator_learns_to_spot_replacements_that_break_a_pattern():
    # About 1.5 minutes on 2 CPU cores. The generator starts near uniform, so at first
    # nearly every masked token is replaced: the base rate is about 85% "original".
    rng = np.random.default_rng(0)
    vocabulary, length = 64, 64
    x, y = _progressions(rng, 32 * 600, length, vocabulary, mask_id=4)
    model = ElectraPretrainer(
        vocabulary, num_layers=2, hidden_dim=128, num_heads=4, intermediate_dim=512,
        norm_first=True, pad_id=PAD,
    )  # fmt: skip
    model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss=None)
    model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)

    x, y = _progressions(np.random.default_rng(1), 256, length, vocabulary, mask_id=4)
    replaced_ids, replaced = model.replace_tokens(x["token_ids"], x["mask_positions"], y, model(x))
    logits = keras.ops.convert_to_numpy(model.discriminate(replaced_ids))
    replaced = keras.ops.convert_to_numpy(replaced)
    accuracy = np.mean((logits > 0) == replaced)
    assert accuracy > 0.93, (accuracy, 1 - replaced.mean())
