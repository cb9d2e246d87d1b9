"""`from_keras_hub`: a keras-hub BERT-family backbone becomes our encoder, numbers intact.

Offline: tiny backbones are built here and given random weights everywhere (biases,
layer-norm betas, gammas away from one, BERT's segment table), so a weight left out,
swapped or copied to the wrong place changes the outputs.
"""

import os

import keras
import numpy as np
import pytest
from model_cases import EAGER_STEP, predict_logits

from keras_transformer.layers import gelu_approximate
from keras_transformer.models import MaskedLM, TransformerClassifier, from_keras_hub
from tests.random_weights import randomize_weights

keras_hub = pytest.importorskip("keras_hub")

VOCAB, MAX_LENGTH = 50, 24
SIZES = dict(
    vocabulary_size=VOCAB,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=MAX_LENGTH,
)
LENGTHS = (12, 7, 3)  # one full row, two padded ones
ATOL = 1e-5

# class name, pad id, feed-forward activation and epsilon the conversion must pick.
BACKBONES = {
    "bert": ("BertBackbone", 0, gelu_approximate, 1e-12),
    "distil_bert": ("DistilBertBackbone", 0, "gelu", 1e-12),
    "roberta": ("RobertaBackbone", 1, "gelu", 1e-5),
}


def make_backbone(kind, seed=0, scale=0.3):
    backbone = getattr(keras_hub.models, BACKBONES[kind][0])(**SIZES, dropout=0.1)
    return randomize_weights(backbone, seed, scale)


def padded_ids(pad_id, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB - 1, (len(LENGTHS), max(LENGTHS)))
    ids = np.where(ids >= pad_id, ids + 1, ids)  # no pad id among the real tokens
    real = np.arange(ids.shape[1])[None, :] < np.asarray(LENGTHS)[:, None]
    return np.where(real, ids, pad_id).astype("int32"), real


def inference(model, x):
    """Eager on TensorFlow; `predict` on JAX, where eager mode compiles op by op."""
    if keras.backend.backend() == "jax":
        outputs = model.predict(x, batch_size=len(LENGTHS), verbose=0)
    else:
        outputs = model(x, training=False)
    return keras.tree.map_structure(keras.ops.convert_to_numpy, outputs)


def backbone_output(backbone, ids, pad_id):
    inputs = {"token_ids": ids, "padding_mask": (ids != pad_id).astype("int32")}
    if isinstance(backbone, keras_hub.models.BertBackbone):
        inputs["segment_ids"] = np.zeros_like(ids)
        return inference(backbone, inputs)["sequence_output"]
    return inference(backbone, inputs)


def assert_encoder_matches(model, backbone, pad_id):
    ids, real = padded_ids(pad_id)
    ours = inference(model.encoder, ids)
    theirs = backbone_output(backbone, ids, pad_id)
    difference = np.abs(ours[real] - theirs[real]).max()
    assert difference < ATOL, difference
    # The comparison has teeth: the states are O(1), not near zero.
    assert np.abs(theirs[real]).mean() > 0.3


@pytest.mark.backend_agnostic
@pytest.mark.parametrize("kind", sorted(BACKBONES))
def test_classifier_encoder_matches_the_backbone(kind):
    _, pad_id, activation, epsilon = BACKBONES[kind]
    backbone = make_backbone(kind)
    model = from_keras_hub(backbone, num_classes=3)

    assert isinstance(model, TransformerClassifier)
    assert model.pooling == "cls" and model.pad_id == pad_id
    assert model.activation == activation and model.layer_norm_epsilon == epsilon
    assert model.max_sequence_length == MAX_LENGTH and model.position == "learned"
    assert not model.scale_embeddings and model.embedding_layer_norm and not model.norm_first
    assert (model.dropout, model.attention_dropout, model.activation_dropout) == (0.1, 0.1, 0.0)
    assert_encoder_matches(model, backbone, pad_id)


@pytest.mark.backend_agnostic
def test_masked_lm_holds_the_backbone_encoder():
    backbone = make_backbone("bert", seed=2)
    model = from_keras_hub(backbone, dropout=0.0, name="bert_mlm")

    assert isinstance(model, MaskedLM) and model.name == "bert_mlm" and model.dropout == 0.0
    assert_encoder_matches(model, backbone, pad_id=0)
    ids, _ = padded_ids(0)
    assert inference(model, ids).shape == (len(LENGTHS), max(LENGTHS), VOCAB)
    # Handing the converted encoder on (as after further pretraining) keeps it intact.
    classifier = TransformerClassifier.from_encoder(model, num_classes=2, pooling="cls")
    np.testing.assert_array_equal(inference(classifier.encoder, ids), inference(model.encoder, ids))


def test_converted_classifier_fits_and_reloads_without_custom_objects(tmp_path):
    backbone = make_backbone("roberta", seed=3, scale=0.1)
    model = from_keras_hub(backbone, num_classes=2)
    ids, _ = padded_ids(pad_id=1)
    labels = np.array([0, 1, 1], "int32")
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        run_eagerly=EAGER_STEP,
    )
    before = keras.ops.convert_to_numpy(model.encoder.weights[0])
    history = model.fit(ids, labels, batch_size=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert not np.array_equal(keras.ops.convert_to_numpy(model.encoder.weights[0]), before)

    expected = predict_logits(model, ids)
    path = os.path.join(tmp_path, "converted.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is TransformerClassifier
    np.testing.assert_array_equal(predict_logits(loaded, ids), expected)


def test_bert_feed_forward_reloads_with_gelu_approximate(tmp_path):
    model = from_keras_hub(make_backbone("bert"), num_classes=2)
    path = os.path.join(tmp_path, "bert.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    blocks = loaded.encoder.get_layer("transformer_encoder").blocks
    assert all(block.feed_forward.activation is gelu_approximate for block in blocks)


def test_unsupported_backbone_names_its_class_and_the_supported_ones():
    with pytest.raises(ValueError, match=r"BertBackbone.*RobertaBackbone.*Received: a Dense"):
        from_keras_hub(keras.layers.Dense(4))


def test_a_task_is_pointed_to_its_backbone():
    task = keras_hub.models.BertTextClassifier(
        make_backbone("bert"), num_classes=2, preprocessor=None
    )
    with pytest.raises(ValueError, match=r"BertTextClassifier\..*pass its `\.backbone`"):
        from_keras_hub(task, num_classes=2)


def test_arguments_contradicting_the_backbone_raise():
    backbone = make_backbone("distil_bert")
    with pytest.raises(ValueError, match=r"`hidden_dim` is fixed by the DistilBertBackbone \(16\)"):
        from_keras_hub(backbone, num_classes=2, hidden_dim=32)
    with pytest.raises(ValueError, match=r"`activation` is fixed.*Received: activation='relu'"):
        from_keras_hub(backbone, num_classes=2, activation="relu")
    with pytest.raises(ValueError, match=r"Received: pooling='mean'"):
        from_keras_hub(backbone, pooling="mean")
