"""`TransformerClassifier.from_encoder`: a pretrained encoder under a new classification head."""

import os

import keras
import numpy as np
import pytest
from model_cases import (
    EAGER_STEP,
    NUM_CLASSES,
    SIZES,
    SOURCE_LENGTH,
    VOCAB,
    classifier_data,
    make_classifier,
    make_lm,
    make_masked_lm,
    predict_logits,
    token_ids,
)

from keras_transformer.models import MaskedLM, TransformerClassifier
from keras_transformer.models.encoder_model_base import copy_encoder_weights

pytestmark = pytest.mark.backend_agnostic


def _encode(model, ids):
    if keras.backend.backend() == "jax":
        return model.encoder.predict(ids, verbose=0)
    return keras.ops.convert_to_numpy(model.encoder(ids, training=False))


def _weights(layer):
    return [np.array(w) for w in layer.trainable_weights]


@pytest.fixture
def pretrained(rng):
    """A `MaskedLM` with weights unlike any fresh model's, as after pretraining."""
    model = make_masked_lm(
        norm_first=True,
        activation="gelu",
        dropout=0.15,
        attention_dropout=0.05,
        activation_dropout=0.1,
    )
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.2, weight.shape).astype("float32"))
    return model


def test_the_encoder_computes_exactly_what_the_pretrained_one_does(pretrained, rng):
    ids = token_ids(rng, (4, SOURCE_LENGTH))
    ids[:, -2:] = 0  # padding too
    classifier = TransformerClassifier.from_encoder(pretrained, num_classes=5, pooling="cls")
    np.testing.assert_array_equal(_encode(classifier, ids), _encode(pretrained, ids))
    # A fresh classifier of the same sizes computes something else.
    fresh = TransformerClassifier(**pretrained.encoder_config(), num_classes=5)
    assert not np.allclose(_encode(fresh, ids), _encode(pretrained, ids), atol=1e-3)
    # The architecture and the dropout rates come from the pretrained model.
    for name, value in pretrained.encoder_config().items():
        assert getattr(classifier, name) == value, name
    assert (classifier.norm_first, classifier.activation) == (True, "gelu")
    dropouts = ("dropout", "attention_dropout", "activation_dropout")
    assert [getattr(classifier, name) for name in dropouts] == [0.15, 0.05, 0.1]
    # The weights are copies: training one model leaves the other alone.
    assert not any(a is b for a, b in zip(classifier.encoder.weights, pretrained.encoder.weights))
    assert not any(a.path.startswith("head") for a in classifier.weights), (
        "the masked-LM head does not come along"
    )


def test_the_head_is_new(pretrained, rng):
    classifier = TransformerClassifier.from_encoder(pretrained, num_classes=5)
    assert (classifier.num_classes, classifier.pooling) == (5, "mean")
    kernel = np.array(classifier.classifier_head.kernel)
    bias = np.array(classifier.classifier_head.bias)
    assert kernel.shape == (SIZES["hidden_dim"], 5)
    # Freshly initialised: zero bias, a Glorot-uniform kernel (limit sqrt(6 / (16 + 5))).
    assert np.all(bias == 0) and np.abs(kernel).max() <= np.sqrt(6 / 21) and kernel.std() > 0.1
    ids = token_ids(rng, (3, SOURCE_LENGTH))
    hidden = _encode(pretrained, ids)
    expected = hidden.mean(axis=1) @ kernel + bias
    np.testing.assert_allclose(predict_logits(classifier, ids), expected, rtol=1e-5, atol=1e-5)


def test_dropout_rates_and_name_may_differ(pretrained, rng):
    classifier = TransformerClassifier.from_encoder(
        pretrained,
        NUM_CLASSES,
        dropout=0.3,
        attention_dropout=0.2,
        activation_dropout=0.25,
        name="fine_tuned",
    )
    assert classifier.name == "fine_tuned"
    config = classifier.get_config()
    assert (config["dropout"], config["attention_dropout"], config["activation_dropout"]) == (
        0.3,
        0.2,
        0.25,
    )
    stack = classifier.encoder.get_layer("transformer_encoder").get_config()
    assert (stack["dropout"], stack["attention_dropout"], stack["activation_dropout"]) == (
        0.3,
        0.2,
        0.25,
    )
    assert classifier.head_dropout.rate == 0.3
    # Dropout is off at inference: still the same encoder.
    ids = token_ids(rng, (2, SOURCE_LENGTH))
    np.testing.assert_array_equal(_encode(classifier, ids), _encode(pretrained, ids))


@pytest.mark.parametrize(
    "kwargs, difference",
    [
        ({"vocabulary_size": VOCAB + 1}, f"vocabulary_size: {VOCAB} in the pretrained encoder, "),
        ({"hidden_dim": 32}, "hidden_dim: 16 in the pretrained encoder, 32 in the"),
        ({"num_layers": 2}, "num_layers: 1 in the pretrained encoder, 2 in the"),
        (
            {"position": "learned", "max_sequence_length": 16},
            "max_sequence_length: None in the pretrained encoder, 16 in the "
            "TransformerClassifier; position: 'sinusoidal' in the pretrained encoder, "
            "'learned' in the",
        ),
        ({"activation": "relu"}, "activation: 'gelu' in the pretrained encoder, 'relu' in the"),
    ],
)
def test_a_mismatched_size_names_the_argument_and_both_values(pretrained, kwargs, difference):
    with pytest.raises(ValueError) as info:
        TransformerClassifier.from_encoder(pretrained, NUM_CLASSES, **kwargs)
    message = str(info.value)
    assert message.startswith("The encoders differ, so the weights cannot be copied: ")
    assert difference in message, message
    if "vocabulary_size" in kwargs:
        assert f"{VOCAB + 1} in the TransformerClassifier" in message


def test_copy_encoder_weights_lists_every_difference(pretrained):
    # Neither norm_first nor gelu, and two more differences.
    target = TransformerClassifier(VOCAB, NUM_CLASSES, num_layers=2, pad_id=1, **SIZES)
    with pytest.raises(ValueError) as info:
        copy_encoder_weights(pretrained, target)
    assert str(info.value) == (
        "The encoders differ, so the weights cannot be copied: "
        "num_layers: 1 in the pretrained encoder, 2 in the TransformerClassifier; "
        "norm_first: True in the pretrained encoder, False in the TransformerClassifier; "
        "pad_id: 0 in the pretrained encoder, 1 in the TransformerClassifier; "
        "activation: 'gelu' in the pretrained encoder, 'relu' in the TransformerClassifier. "
        "Build the new model with the pretrained encoder's sizes (e.g. "
        "`TransformerClassifier.from_encoder(pretrained, num_classes)`)."
    )


def test_a_model_without_an_encoder_is_refused(pretrained):
    with pytest.raises(ValueError) as info:
        TransformerClassifier.from_encoder(make_lm(), NUM_CLASSES)
    assert str(info.value) == (
        "`pretrained` must be an encoder-only model of this library (`MaskedLM`, "
        "`ElectraPretrainer`, `TransformerClassifier`). Received: TransformerLM. A keras-hub "
        "backbone converts with `from_keras_hub`."
    )
    for source, target, name in [
        (make_lm(), pretrained, "source"),
        (pretrained, make_lm(), "target"),
    ]:
        with pytest.raises(ValueError) as info:
            copy_encoder_weights(source, target)
        assert str(info.value) == (
            f"`{name}` must be an encoder-only model of this library (`MaskedLM`, "
            "`ElectraPretrainer`, `TransformerClassifier`). Received: TransformerLM."
        )


def test_a_classifier_is_a_source_too(rng):
    first = make_classifier()
    second = TransformerClassifier.from_encoder(first, num_classes=2)
    ids = token_ids(rng, (2, SOURCE_LENGTH))
    np.testing.assert_array_equal(_encode(second, ids), _encode(first, ids))
    assert predict_logits(second, ids).shape == (2, 2)


def _compile(model):
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        run_eagerly=EAGER_STEP,
    )


def test_a_frozen_encoder_stays_put_while_the_head_trains(pretrained, rng):
    classifier = TransformerClassifier.from_encoder(pretrained, NUM_CLASSES)
    x, y = classifier_data(rng)
    pretrained_weights = _weights(pretrained)

    classifier.encoder.trainable = False
    _compile(classifier)  # Keras fixes the trained weights when it compiles
    encoder_before = [np.array(w) for w in classifier.encoder.weights]
    head_before = _weights(classifier.classifier_head)
    classifier.train_on_batch(x, y)
    for before, after in zip(encoder_before, classifier.encoder.weights):
        np.testing.assert_array_equal(np.array(after), before)
    assert all(
        not np.array_equal(b, a) for b, a in zip(head_before, _weights(classifier.classifier_head))
    )

    classifier.encoder.trainable = True
    _compile(classifier)
    classifier.train_on_batch(x, y)
    changed = [
        not np.array_equal(before, np.array(after))
        for before, after in zip(encoder_before, classifier.encoder.weights)
    ]
    assert sum(changed) > len(changed) // 2, changed
    # Fine-tuning the copy leaves the pretrained model untouched.
    for before, after in zip(pretrained_weights, _weights(pretrained)):
        np.testing.assert_array_equal(after, before)


def test_the_copied_classifier_saves_and_loads(pretrained, rng, tmp_path):
    classifier = TransformerClassifier.from_encoder(pretrained, NUM_CLASSES, dropout=0.2)
    ids = token_ids(rng, (3, SOURCE_LENGTH))
    expected = predict_logits(classifier, ids)
    path = os.path.join(tmp_path, "classifier.keras")
    classifier.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is TransformerClassifier
    assert loaded.get_config() == classifier.get_config()
    np.testing.assert_array_equal(predict_logits(loaded, ids), expected)
    np.testing.assert_array_equal(_encode(loaded, ids), _encode(pretrained, ids))


def test_mixed_precision_carries_over(rng):
    pretrained = MaskedLM(VOCAB, num_layers=1, **SIZES, dtype="mixed_bfloat16")
    classifier = TransformerClassifier.from_encoder(pretrained, NUM_CLASSES)
    assert classifier.dtype_policy.name == "mixed_bfloat16"
    assert classifier.classifier_head.dtype_policy.name == "mixed_bfloat16"
    assert all(w.dtype == "float32" for w in classifier.weights)
    ids = token_ids(rng, (2, SOURCE_LENGTH))
    np.testing.assert_array_equal(_encode(classifier, ids), _encode(pretrained, ids))
    logits = classifier.predict(ids, verbose=0)
    assert logits.dtype == np.float32 and np.all(np.isfinite(logits))
    # An explicit dtype wins.
    full = TransformerClassifier.from_encoder(pretrained, NUM_CLASSES, dtype="float32")
    assert full.dtype_policy.name == "float32"
