"""Keras 3's own features on every model class: `quantize`, LoRA and `export`."""

import os

import keras
import numpy as np
import pytest
from model_cases import BY_NAME, CASES, EAGER_STEP, compile_model, predict_logits

from keras_transformer.saving import load_pretrained, save_pretrained
from tests.harness import without_gc_collect
from tests.random_weights import randomize_weights
from tests.serving_helper import ask

pytestmark = pytest.mark.backend_agnostic


@pytest.fixture(autouse=True)
def _fast_quantize():
    with without_gc_collect():
        yield


# Quantisation error allowed relative to the logits' mean magnitude, for random weights
# of standard deviation 0.3 (the block-level tests in tests/reference compare with the
# error Keras's own layers make); the bug this guards against was off by >1,000x.
TOLERANCE = {"int8": 0.25, "int4": 2.0, "float8": 0.75}
if keras.backend.backend() != "tensorflow":
    # JAX's and PyTorch's eager ops compile per shape: int8 only there, to keep CI short.
    TOLERANCE = {"int8": TOLERANCE["int8"]}


@BY_NAME
def test_quantized_model_is_close_and_saves(case, rng, tmp_path):
    x, _ = case.data(rng)
    for mode, tolerance in TOLERANCE.items():
        model = randomize_weights(case.make(), rng)
        reference = predict_logits(model, x)
        model.quantize(mode)
        logits = predict_logits(model, x)
        error = float(np.max(np.abs(logits - reference)))
        assert 0 < error <= tolerance * float(np.mean(np.abs(reference))), (mode, error)
        if mode == "float8":
            continue  # its scaling history moves at each call; int8 and int4 are stateless
        path = os.path.join(tmp_path, f"{mode}.keras")
        model.save(path)
        np.testing.assert_array_equal(predict_logits(keras.saving.load_model(path), x), logits)
        save_pretrained(model, tmp_path / mode)
        np.testing.assert_array_equal(
            predict_logits(load_pretrained(tmp_path / mode).model, x), logits
        )


def _lora_variables(model):
    return [v for v in model.trainable_variables if "lora_kernel" in v.path]


@BY_NAME
def test_lora_starts_as_a_no_op_and_trains_only_its_weights(case, rng, tmp_path):
    model = randomize_weights(case.make(), rng)
    x, y = case.data(rng)
    reference = predict_logits(model, x)
    model.enable_lora(2)
    np.testing.assert_array_equal(predict_logits(model, x), reference)

    head = {v.path for v in model.trainable_variables if "lora_kernel" not in v.path}
    # Six projections per block (four attention, two feed-forward), A and B each.
    blocks = 2 if case.name == "seq2seq" else 1
    attention = 2 if case.name == "seq2seq" else 1  # the decoder's cross-attention
    assert len(_lora_variables(model)) == 2 * (6 * blocks + 4 * (attention - 1))
    assert head == (
        {
            "transformer_classifier/classifier_head/kernel",
            "transformer_classifier/classifier_head/bias",
        }
        if case.name == "classifier"
        else set()
    )

    before = {v.path: keras.ops.convert_to_numpy(v) for v in model.weights}
    compile_model(model, case, optimizer=keras.optimizers.Adam(1e-2), run_eagerly=EAGER_STEP)
    model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)
    changed = {
        v.path
        for v in model.weights
        if not np.array_equal(before[v.path], keras.ops.convert_to_numpy(v))
    }
    trained = {v.path for v in model.trainable_variables}
    assert changed and changed <= trained, changed - trained
    tuned = predict_logits(model, x)
    assert not np.allclose(tuned, reference)

    # Saving writes the kernels with their deltas merged (Keras's LoRA behaviour).
    path = os.path.join(tmp_path, "lora.keras")
    model.save(path)
    np.testing.assert_allclose(
        predict_logits(keras.saving.load_model(path), x), tuned, rtol=1e-5, atol=1e-5
    )
    merged = model.merge_lora()
    assert not [v for v in merged.weights if "lora" in v.path]
    assert len(merged.weights) == len(case.make().weights)
    np.testing.assert_allclose(predict_logits(merged, x), tuned, rtol=1e-5, atol=1e-5)


def test_lora_arguments_are_checked():
    model = CASES[1].make()
    with pytest.raises(ValueError, match="target_names"):
        model.enable_lora(2, target_names=["qkv"])
    with pytest.raises(ValueError, match="rank"):
        model.enable_lora(0)
    model.enable_lora(2, target_names=["query", "value"])
    assert {v.path.split("/")[-2] for v in _lora_variables(model)} == {"query", "value"}
    with pytest.raises(ValueError, match="already enabled"):
        model.enable_lora(2)


@BY_NAME
def test_quantized_model_with_lora(case, rng):
    # QLoRA: adapters on an int8 model start as a no-op and follow the fused == separate
    # projections rule (the model's self-attention runs the separate path once quantised).
    model = randomize_weights(case.make(), rng)
    x, _ = case.data(rng)
    model.quantize("int8")
    quantized = predict_logits(model, x)
    model.enable_lora(2)
    np.testing.assert_array_equal(predict_logits(model, x), quantized)


# The encoder-decoder (both stacks, cross-attention, two inputs) and the masked LM (its
# gather at the masked positions): the classifier's and the LM's layers are among theirs, and
# both are exported to LiteRT by tests/saving/test_litert.py.
EXPORT_CASES = [case for case in CASES if case.name in ("seq2seq", "masked_lm")]


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="SavedModel and ONNX export run through TensorFlow here (see docs/keras_features.md)",
)
def test_export_saved_model_and_onnx_match_keras_in_a_process_without_this_library(rng, tmp_path):
    pytest.importorskip("tf2onnx")
    pytest.importorskip("onnxruntime")

    jobs = {}
    for case in EXPORT_CASES:
        model = randomize_weights(case.make(), rng)
        x, _ = case.data(rng, batch=3)
        # Another batch size and length than any traced before: the signature is dynamic.
        x = {k: v[:, : v.shape[1] - (k != "mask_positions")] for k, v in x.items()}
        if "mask_positions" in x:  # still inside the shortened rows
            x["mask_positions"] = np.minimum(x["mask_positions"], x["token_ids"].shape[1] - 1)
        folder = tmp_path / case.name
        model.export(str(folder / "saved_model"), verbose=False)
        model.export(str(folder / "model.onnx"), format="onnx", verbose=False)
        np.savez(folder / "inputs.npz", **x)
        np.save(folder / "expected.npy", predict_logits(model, x))
        jobs[case.name] = [
            str(folder / "saved_model"),
            str(folder / "model.onnx"),
            str(folder / "inputs.npz"),
            str(folder / "expected.npy"),
        ]
    # Loaded and run by the serving helper: TensorFlow and onnxruntime, no keras.
    answer = ask("check_exports", jobs=jobs)
    assert not answer["imported_keras_transformer"]
    errors = answer["result"]
    assert set(errors) == {case.name for case in EXPORT_CASES}
    for name, (saved, onnx) in errors.items():
        assert saved <= 1e-5 and onnx <= 1e-5, (name, saved, onnx)


@BY_NAME
def test_quantized_mixed_precision_model(case, rng):
    # Keras's int8 embedding returns float32 under mixed precision; the embedding layer
    # casts it back, else the position add failed (bfloat16 + float32) on TensorFlow.
    model = case.make(dtype="mixed_bfloat16")
    x, _ = case.data(rng)
    reference = predict_logits(model, x)
    model.quantize("int8")
    logits = predict_logits(model, x)
    assert logits.dtype == np.float32
    assert np.max(np.abs(logits - reference)) <= TOLERANCE["int8"] * np.mean(np.abs(reference))
