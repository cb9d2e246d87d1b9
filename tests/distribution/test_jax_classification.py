"""The classification example on 8 simulated JAX devices: batches completed for the mesh.

The devices are tests/conftest.py's (8 when JAX runs the tests):

    KERAS_BACKEND=jax python -m pytest -m multi_device

37 texts in batches of 16 end in a batch of 5, which 8 replicas cannot split: the dataset
completes it with 3 copies of sample weight 0 (`batch_size_multiple`), and the example's
compile (`compile_classifier`: a `mean_with_sample_weight` loss, accuracy as a weighted
metric) leaves them out. Trained from the same weights on the same texts without dropout,
the mesh and one device then differ only by the order of floating-point sums.
"""

import keras
import numpy as np
import pytest

import keras_transformer as kt
from examples.text_classification.evaluation import classify
from examples.text_classification.train import compile_classifier
from keras_transformer.text import SubwordTokenizer, make_classification_dataset

pytestmark = [
    pytest.mark.multi_device,
    pytest.mark.skipif(keras.backend.backend() != "jax", reason="keras.distribution on JAX"),
]

WORDS = "good bad film plot acting great awful movie boring moving dull witty".split()
TEXTS, BATCH, MAX_LENGTH = 37, 16, 12
# As for translation (test_jax_mesh.py): float32 sums in another order agree to ~1e-6;
# a copy counted in the loss would move it by ~1e-2.
LOSS_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    # Texts of one length: every batch has the same width, so fewer compiles.
    texts = [" ".join(rng.choice(WORDS, size=6)) for _ in range(TEXTS)]
    labels = [int("good" in text or "great" in text) for text in texts]
    tokenizer = SubwordTokenizer.train(texts * 4, vocabulary_size=48, byte_fallback=False)
    return texts, labels, tokenizer


def dataset(data, batch_size=BATCH, multiple=1):
    texts, labels, tokenizer = data
    return make_classification_dataset(
        texts,
        labels,
        tokenizer,
        batch_size=batch_size,
        max_length=MAX_LENGTH,
        shuffle=False,
        bucket=False,
        batch_size_multiple=multiple,
    )


def build(data, mesh=None):
    model = kt.models.build(
        "classification",
        preset="tiny",
        precision="float32",
        compile=False,
        mesh=mesh,
        vocabulary_size=data[2].vocabulary_size,
        num_classes=2,
        num_layers=1,
        hidden_dim=16,
        num_heads=4,
        intermediate_dim=32,
        dropout=0.0,
    )
    compile_classifier(model, learning_rate=1e-2, total_steps=3)
    return model


def train_and_score(model, data, multiple):
    history = model.fit(dataset(data, multiple=multiple), epochs=1, verbose=0)
    # One batch of every text (37, completed to 40 on the mesh): its loss is the mean over
    # the texts, where `evaluate` would weight several batches' means by their rows.
    everything = dataset(data, batch_size=40 if multiple > 1 else TEXTS, multiple=multiple)
    scores = model.evaluate(everything, verbose=0, return_dict=True)
    predictions, labels, _ = classify(model, everything)
    return history.history["accuracy"][0], scores, predictions, labels


@pytest.fixture(scope="module")
def single_device(data):
    keras.distribution.set_distribution(None)
    model = build(data)
    initial = model.get_weights()
    results = train_and_score(model, data, multiple=1)
    return initial, model.get_weights(), results


def test_padded_batches_on_eight_devices_give_the_one_device_loss(data, single_device):
    initial, reference_weights, reference = single_device
    # Data parallel: the batch axis is the one that needs the copies (the model axis of a
    # 2x4 mesh splits weights, tested on the translation model).
    model = build(data, "8")
    model.set_weights(initial)
    accuracy, scores, predictions, labels = train_and_score(model, data, multiple=8)
    reference_accuracy, reference_scores, reference_predictions, reference_labels = reference
    # The copies would change the training accuracy's denominator: 40 rows, not 37.
    assert accuracy == pytest.approx(reference_accuracy, abs=1e-6)
    np.testing.assert_allclose(scores["loss"], reference_scores["loss"], rtol=LOSS_TOLERANCE)
    assert scores["accuracy"] == pytest.approx(reference_scores["accuracy"], abs=1e-6)
    for variable, want in zip(model.weights, reference_weights):
        if variable.path.endswith("key/bias"):
            continue  # rounding noise that Adam scales up (see test_jax_mesh.py)
        np.testing.assert_allclose(variable.numpy(), want, atol=1e-5, err_msg=variable.path)
    # The reported scores count the texts, not the copies.
    assert len(labels) == len(predictions) == TEXTS
    np.testing.assert_array_equal(labels, reference_labels)
    np.testing.assert_array_equal(predictions, reference_predictions)
