"""What one backend saves, every backend loads: configs name public classes only."""

import json
import sys

import keras
import numpy as np
import pytest

from keras_transformer.models import TransformerClassifier
from keras_transformer.saving import PretrainedDirectoryError, load_pretrained, save_pretrained

IDS = np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")


def saved_compiled_classifier(directory):
    """A fitted classifier whose optimizer (AdamW in a LossScaleOptimizer) is saved too."""
    model = TransformerClassifier(
        vocabulary_size=30, num_classes=2, num_layers=1, hidden_dim=8, num_heads=2,
        intermediate_dim=16,
    )  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.AdamW(1e-3)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(IDS, np.array([0, 1]), verbose=0)
    return model, save_pretrained(model, directory)


def outputs(model):
    return keras.ops.convert_to_numpy(model(IDS))


@pytest.mark.backend_agnostic
def test_saved_config_names_public_classes_only(tmp_path):
    model, directory = saved_compiled_classifier(tmp_path / "model")
    text = (directory / "config.json").read_text(encoding="utf-8")
    # On PyTorch Keras builds its optimizers from private subclasses; the file must not say so.
    assert "keras.src.backend" not in text
    optimizer = json.loads(text)["compile_config"]["optimizer"]
    assert optimizer["module"] == "keras.optimizers"
    assert optimizer["config"]["inner_optimizer"]["module"] == "keras.optimizers"
    assert optimizer["config"]["inner_optimizer"]["class_name"] == "AdamW"
    reloaded = load_pretrained(directory).model
    np.testing.assert_allclose(outputs(reloaded), outputs(model), rtol=1e-6, atol=1e-6)


def rewrite_json(path, change):
    """Applies `change` to the JSON file at `path` in place."""
    content = json.loads(path.read_text(encoding="utf-8"))
    change(content)
    path.write_text(json.dumps(content), encoding="utf-8")


@pytest.mark.backend_agnostic
@pytest.mark.skipif(keras.backend.backend() == "torch", reason="reads what PyTorch wrote")
def test_an_optimizer_saved_on_pytorch_by_name_loads_without_pytorchs_code(tmp_path):
    model, directory = saved_compiled_classifier(tmp_path / "model")

    def as_written_on_pytorch_before(config):
        inner = config["compile_config"]["optimizer"]["config"]["inner_optimizer"]
        inner["module"] = "keras.src.backend.torch.optimizers.torch_adamw"
        inner["registered_name"] = "AdamW"

    rewrite_json(directory / "config.json", as_written_on_pytorch_before)
    before = set(sys.modules)
    reloaded = load_pretrained(directory).model
    # Importing it brought PyTorch's backend code in: a segmentation fault where that import
    # crashes, and an optimizer that cannot train on TensorFlow.
    assert not [name for name in set(sys.modules) - before if "backend.torch" in name]
    assert isinstance(reloaded.optimizer.inner_optimizer, keras.optimizers.AdamW)
    np.testing.assert_allclose(outputs(reloaded), outputs(model), rtol=1e-6, atol=1e-6)


@pytest.mark.backend_agnostic
def test_another_backends_private_class_is_refused_by_name(tmp_path):
    _, directory = saved_compiled_classifier(tmp_path / "model")
    other = "jax" if keras.backend.backend() == "torch" else "torch"
    module = f"keras.src.backend.{other}.layers"

    def name_a_private_loss(config):
        config["compile_config"]["loss"] = {
            "module": module, "class_name": "SomeLoss", "config": {}, "registered_name": None,
        }  # fmt: skip

    rewrite_json(directory / "config.json", name_a_private_loss)
    before = set(sys.modules)
    with pytest.raises(PretrainedDirectoryError) as error:
        load_pretrained(directory)
    message = str(error.value)
    assert "\n" not in message
    assert f"`{module}.SomeLoss`" in message and f"KERAS_BACKEND={other}" in message
    assert module not in set(sys.modules) - before


@pytest.mark.backend_agnostic
def test_jit_compile_saved_on_another_backend_is_this_backends_default(tmp_path):
    model, directory = saved_compiled_classifier(tmp_path / "model")
    default = model.jit_compile  # compiled with "auto": XLA on JAX, not on TensorFlow's CPU
    other = "jax" if keras.backend.backend() != "jax" else "torch"

    def compiled_the_other_way(config):
        config["compile_config"]["jit_compile"] = not default

    rewrite_json(directory / "config.json", compiled_the_other_way)
    # On the backend that saved it, the choice stays.
    assert load_pretrained(directory).model.jit_compile is (not default)
    rewrite_json(directory / "metadata.json", lambda metadata: metadata.update(backend=other))
    # Saved elsewhere, it says how that backend compiled: JAX's True is torch.compile here.
    assert load_pretrained(directory).model.jit_compile is default
