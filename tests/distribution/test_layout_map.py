"""`get_layout_map`, `parse_mesh` and the mesh errors, on one device: the map is pure names.

A `DeviceMesh` of device names is enough here (the map reads its shape and axes); the
`multi_device` tests check that variables created under the map are sharded as it says.
"""

import keras
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.distribution import get_layout_map, make_distribution, parse_mesh

pytestmark = pytest.mark.backend_agnostic

SIZES = dict(hidden_dim=32, num_heads=8, intermediate_dim=64)


def fake_mesh(data, model):
    devices = np.array([f"cpu:{i}" for i in range(data * model)])
    return keras.distribution.DeviceMesh((data, model), ("batch", "model"), devices)


def axes(layout_map, path):
    layout = layout_map[path]
    return None if layout is None else tuple(layout.axes)


MODELS = {
    "seq2seq": lambda **kw: kt.models.Seq2SeqTransformer(
        64, num_encoder_layers=1, num_decoder_layers=1, tie_output_embeddings=False, **kw
    ),
    "classifier": lambda **kw: kt.models.TransformerClassifier(
        64, num_classes=3, num_layers=1, **kw
    ),
    "lm": lambda **kw: kt.models.TransformerLM(64, num_layers=1, **kw),
    "masked_lm": lambda **kw: kt.models.MaskedLM(64, num_layers=1, **kw),
}


def expected_axes(path, shape):
    """The split the docstring promises, written out per weight name."""
    m = "model"
    name = "/".join(path.split("/")[-2:])
    if name in ("query/kernel", "key/kernel", "value/kernel"):
        return (None, m, None)
    if name in ("query/bias", "key/bias", "value/bias"):
        return (m, None)
    if name == "attention_output/kernel":
        return (m, None, None)
    if name == "intermediate_dense/kernel":
        return (None, m)
    if name == "intermediate_dense/bias":
        return (m,)
    if name == "output_dense/kernel":
        return (m, None)
    if name == "token_embedding/embeddings":
        return (m, None)  # by vocabulary: 64 divides over 4
    if name == "output_projection/kernel":
        return (None, m)
    if name in ("output_projection/bias", "masked_lm/output_bias"):
        return (m,)
    return None  # replicated: layer norms, row-split biases, heads, positions


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_weight_gets_the_documented_split(name):
    model = MODELS[name](**SIZES)
    layout_map = get_layout_map(fake_mesh(2, 4), model.get_config())
    sharded = 0
    for variable in model.weights:
        got = axes(layout_map, variable.path)  # also: no path matches two patterns
        assert got == expected_axes(variable.path, variable.shape), variable.path
        if got is not None:
            sharded += 1
            # Every split axis divides over the 4 model devices.
            for size, axis in zip(variable.shape, got):
                assert axis is None or size % 4 == 0, (variable.path, variable.shape)
    # Each block has at least its 4 attention kernels and 2 feed-forward kernels split.
    assert sharded >= 9


def test_grouped_query_attention_keeps_fewer_key_value_heads_whole():
    config = dict(SIZES, num_key_value_heads=2, vocabulary_size=64)
    model = kt.models.TransformerLM(64, num_layers=1, **dict(SIZES, num_key_value_heads=2))
    split_four = get_layout_map(fake_mesh(2, 4), config)
    split_two = get_layout_map(fake_mesh(4, 2), config)
    for variable in model.weights:
        if "/key/" in variable.path or "/value/" in variable.path:
            # 2 key/value heads cannot go to 4 devices: every device keeps both.
            assert axes(split_four, variable.path) is None, variable.path
            assert axes(split_two, variable.path) is not None, variable.path
        if variable.path.endswith("query/kernel"):
            assert axes(split_four, variable.path) == (None, "model", None)


def test_the_gate_of_gated_attention_splits_like_the_query():
    layout_map = get_layout_map(fake_mesh(2, 4), dict(SIZES, vocabulary_size=64))
    attention = kt.layers.MultiHeadAttention(num_heads=8, use_gate=True, name="self_attention")
    attention.build((None, None, 32))
    paths = {w.path.split("/", 1)[1]: w.path for w in attention.weights}
    for name in ("query", "gate"):
        assert axes(layout_map, "decoder/block_0/" + paths[f"{name}/kernel"]) == (
            None,
            "model",
            None,
        )
        assert axes(layout_map, "decoder/block_0/" + paths[f"{name}/bias"]) == ("model", None)


def test_a_vocabulary_that_does_not_divide_splits_the_embeddings_by_width():
    layout_map = get_layout_map(fake_mesh(1, 4), dict(SIZES, source_vocabulary_size=4001))
    assert axes(layout_map, "m/source_embedding/token_embedding/embeddings") == (None, "model")
    assert axes(layout_map, "m/output_projection/kernel") == ("model", None)
    odd = get_layout_map(fake_mesh(1, 4), dict(SIZES, hidden_dim=30, vocabulary_size=4001))
    assert axes(odd, "m/embedding/token_embedding/embeddings") is None


@pytest.mark.parametrize(
    "config, model_axis, match",
    [
        (
            dict(SIZES, num_heads=6),
            "model",
            r"`num_heads`=6 cannot be split over the 4 .* \[1, 2\]",
        ),
        (dict(SIZES, intermediate_dim=66), "model", r"`intermediate_dim`=66 .* \[1, 2\]"),
        ({"hidden_dim": 32, "num_heads": 8}, "model", r"needs `intermediate_dim`"),
        (SIZES, "tensor", r"`model_axis`='tensor' is not an axis .*\('batch', 'model'\)"),
        ([1, 2], "model", r"`config` must be a dict"),
    ],
)
def test_layout_map_errors(config, model_axis, match):
    with pytest.raises(ValueError, match=match):
        get_layout_map(fake_mesh(2, 4), config, model_axis=model_axis)


def test_layout_map_needs_a_device_mesh():
    with pytest.raises(ValueError, match="must be a `keras.distribution.DeviceMesh`"):
        get_layout_map((2, 4), SIZES)


@pytest.mark.parametrize(
    "text, expected", [("4x2", (4, 2)), ("8", (8, 1)), (" 1 X 8 ", (1, 8)), ((2, 4), (2, 4))]
)
def test_parse_mesh(text, expected):
    assert parse_mesh(text) == expected


@pytest.mark.parametrize("bad", ["4x", "0x2", "2x-1", "a", "2x2x2", (2, 2, 2), 8, (2.0, 1), None])
def test_parse_mesh_errors(bad):
    with pytest.raises(ValueError, match=r"`mesh` must be DATAxMODEL .* Received: mesh="):
        parse_mesh(bad)


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="no device list on PyTorch")
def test_a_mesh_larger_than_the_devices_is_refused_before_anything_is_built():
    available = len(keras.distribution.list_devices())
    wanted = f"{available + 1}x1"
    with pytest.raises(ValueError, match=rf"Mesh {wanted} needs {available + 1} devices, but "):
        kt.models.build("translation", preset="tiny", mesh=wanted, source_vocabulary_size=64)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.distribute's limit")
def test_tensorflow_refuses_a_model_axis():
    with pytest.raises(ValueError, match=r"only JAX's .*ModelParallel.* Use mesh 8x1"):
        make_distribution("2x4", SIZES)


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="PyTorch has no engine here")
def test_torch_has_no_engine_here():
    with pytest.raises(ValueError, match="No distribution engine for the 'torch' backend"):
        make_distribution("1x1")


def test_the_guide_and_ci_run_the_multi_device_tests():
    import pathlib

    repository = pathlib.Path(__file__).resolve().parents[2]
    guide = (repository / "docs" / "distribution.md").read_text(encoding="utf-8")
    ci = (repository / ".ci" / "run").read_text(encoding="utf-8")
    for command in ("KERAS_BACKEND=jax python -m pytest -n 2 -m multi_device",
                    "python -m pytest -m multi_device"):  # fmt: skip
        assert f"\n{command}\n" in guide
    # CI: the TensorFlow run selects them by default, the JAX run by name.
    assert "&& python -m pytest -n 2 && " in ci
    assert 'KERAS_BACKEND=jax python -m pytest -n 2 -m "(backend_agnostic or multi_device)' in ci


def test_the_benchmark_plans_the_multi_accelerator_run():
    import pathlib
    import subprocess
    import sys

    repository = pathlib.Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "benchmarks/distribution.py", "--accelerators", "--dry-run"],
        cwd=repository,
        capture_output=True,
        text=True,
        env={"KERAS_BACKEND": "jax", "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    assert "preset base" in result.stdout
    assert "meshes for 8 devices: 1x1, 2x1, 4x1, 8x1, 2x4, 1x8" in result.stdout
