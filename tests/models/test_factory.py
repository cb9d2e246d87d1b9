"""`keras_transformer.models.build`: presets, the paper's recipe, precision and XLA rules."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.models import device as device_module
from keras_transformer.models import factory
from keras_transformer.models.device import DeviceInfo, choose_jit_compile, choose_precision
from keras_transformer.models.presets import PRESETS
from keras_transformer.training import LabelSmoothedCrossEntropy, MaskedAccuracy, NoamSchedule

pytestmark = pytest.mark.backend_agnostic

AMPERE = DeviceInfo("gpu", "GPU: A100", (8, 0))
VOLTA = DeviceInfo("gpu", "GPU: V100", (7, 0))
PLAIN_CPU = DeviceInfo("cpu", "CPU: test", None, frozenset({"sse2", "avx2", "avx512f"}))
BF16_CPU = DeviceInfo("cpu", "CPU: test", None, frozenset({"avx2", "avx512_bf16"}))
# Small enough to build in milliseconds; the factory's logic does not depend on size.
SMALL = dict(num_layers=1, hidden_dim=16, intermediate_dim=32, num_heads=2)


@pytest.fixture
def device(monkeypatch):
    """Pretends `build` runs on a given device: `device(DeviceInfo(...))`."""

    def use(info):
        # `build` calls the name factory imported, so that is the one to replace.
        monkeypatch.setattr(factory, "detect_device", lambda: info)

    use(PLAIN_CPU)
    return use


def _inner_optimizer(model):
    optimizer = model.optimizer
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        optimizer = optimizer.inner_optimizer
    return optimizer


def copy_task_dataset(vocabulary_size, batch_size=16, length=8, seed=0):
    """Endless batches of `target == source`, teacher-forced behind start token 1."""
    rng = np.random.default_rng(seed)
    source = rng.integers(2, vocabulary_size, (batch_size * 4, length)).astype("int32")
    decoder_inputs = np.concatenate([np.ones_like(source[:, :1]), source[:, :-1]], axis=1)
    features = {"encoder_token_ids": source, "decoder_token_ids": decoder_inputs}
    return tf.data.Dataset.from_tensor_slices((features, source)).repeat().batch(batch_size)


def test_tiny_translation_model_trains_on_tf_data():
    # The real device, not a pretended one: this runs whatever "auto" picks here (float32
    # or mixed_bfloat16 on CPUs, mixed precision and XLA on GPUs).
    model = kt.models.build("translation", preset="tiny", source_vocabulary_size=1000)
    assert isinstance(model, kt.models.Seq2SeqTransformer)
    assert model.compiled
    history = model.fit(copy_task_dataset(1000), steps_per_epoch=10, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < losses[0], losses
    assert "masked_accuracy" in history.history


def test_paper_recipe_for_translation(device):
    model = kt.models.build(
        "translation", preset="tiny", source_vocabulary_size=50, pad_id=2, warmup_steps=123
    )
    optimizer = model.optimizer
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    schedule = optimizer._learning_rate
    assert isinstance(schedule, NoamSchedule)
    assert (schedule.model_dim, schedule.warmup_steps, schedule.scale) == (128, 123, 1.0)
    assert isinstance(model.loss, LabelSmoothedCrossEntropy)
    assert (model.loss.label_smoothing, model.loss.pad_id) == (0.1, 2)
    metric = model._compile_metrics._user_metrics[0]
    assert isinstance(metric, MaskedAccuracy) and metric.pad_id == 2


def test_learning_rate_scale_multiplies_the_schedule():
    model = kt.models.build(
        "translation", preset="tiny", source_vocabulary_size=50, learning_rate_scale=2.5
    )
    schedule = model.optimizer._learning_rate
    reference = NoamSchedule(128, PRESETS["tiny"]["warmup_steps"])
    for step in (1, 100, 5000):
        np.testing.assert_allclose(float(schedule(step)), 2.5 * float(reference(step)), rtol=1e-6)
    with pytest.raises(ValueError, match="`learning_rate_scale` must be a positive number"):
        kt.models.build(
            "translation", preset="tiny", source_vocabulary_size=50, learning_rate_scale=0
        )


def test_classification_and_language_modeling(device, rng):
    classifier = kt.models.build(
        "classification", preset="tiny", vocabulary_size=40, num_classes=3, **SMALL
    )
    assert isinstance(classifier, kt.models.TransformerClassifier)
    assert isinstance(classifier.loss, keras.losses.SparseCategoricalCrossentropy)
    assert classifier.num_classes == 3 and classifier.num_layers == 1
    x = rng.integers(1, 40, (8, 6)).astype("int32")
    y = rng.integers(0, 3, (8,)).astype("int32")
    assert np.isfinite(classifier.train_on_batch(x, y, return_dict=True)["loss"])

    smoothed = kt.models.build(
        "classification", vocabulary_size=40, num_classes=3, label_smoothing=0.2, **SMALL
    )
    assert isinstance(smoothed.loss, LabelSmoothedCrossEntropy)
    assert smoothed.loss.label_smoothing == 0.2 and smoothed.loss.pad_id is None

    lm = kt.models.build("language_modeling", preset="tiny", vocabulary_size=40, **SMALL)
    assert isinstance(lm, kt.models.TransformerLM)
    assert isinstance(lm.loss, LabelSmoothedCrossEntropy) and lm.loss.label_smoothing == 0.1
    ids = rng.integers(1, 40, (8, 7)).astype("int32")
    assert np.isfinite(lm.train_on_batch(ids[:, :-1], ids[:, 1:], return_dict=True)["loss"])


def test_overrides_replace_preset_values(device):
    model = kt.models.build(
        "translation",
        preset="small",
        compile=False,
        source_vocabulary_size=30,
        target_vocabulary_size=40,
        num_layers=1,
        num_decoder_layers=2,
        hidden_dim=32,
        dropout=0.0,
        sliding_window=16,
        name="custom",
    )
    assert not model.compiled and model.name == "custom"
    # The window reaches every self-attention, and no cross-attention.
    assert model.encoder.blocks[0].self_attention.sliding_window == 16
    assert model.decoder.blocks[1].self_attention.sliding_window == 16
    assert model.decoder.blocks[1].cross_attention_layer.sliding_window is None
    assert (model.num_encoder_layers, model.num_decoder_layers) == (1, 2)
    assert (model.hidden_dim, model.num_heads, model.intermediate_dim) == (32, 4, 1024)
    assert (model.dropout, model.target_vocabulary_size) == (0.0, 40)


def test_base_and_big_presets_match_table_3():
    assert {k: PRESETS["base"][k] for k in PRESETS["base"]} == {
        "num_layers": 6,
        "hidden_dim": 512,
        "intermediate_dim": 2048,
        "num_heads": 8,
        "dropout": 0.1,
        "label_smoothing": 0.1,
        "warmup_steps": 4000,
        "learning_rate_scale": 1.0,
    }
    big = PRESETS["big"]
    assert (big["num_layers"], big["hidden_dim"], big["intermediate_dim"]) == (6, 1024, 4096)
    assert (big["num_heads"], big["dropout"], big["label_smoothing"]) == (16, 0.3, 0.1)
    assert big["warmup_steps"] == 4000
    # d_k = d_v = 64 in both (Table 3).
    assert PRESETS["base"]["hidden_dim"] // PRESETS["base"]["num_heads"] == 64
    assert big["hidden_dim"] // big["num_heads"] == 64


def transformer_parameter_count(preset, vocabulary_size):
    """Weights of a post-norm encoder-decoder with one shared, tied embedding matrix."""
    d, ff, n = preset["hidden_dim"], preset["intermediate_dim"], preset["num_layers"]
    attention = 4 * (d * d + d)  # query, key, value and output projections with biases
    feed_forward = d * ff + ff + ff * d + d
    norm = 2 * d
    encoder_block = attention + feed_forward + 2 * norm
    decoder_block = 2 * attention + feed_forward + 3 * norm
    return vocabulary_size * d + n * (encoder_block + decoder_block)


# Building 63M and 214M parameters takes seconds; their count is the same on every backend.
@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the sizes do not depend on the backend"
)
@pytest.mark.parametrize("preset, table_3", [("base", 65e6), ("big", 213e6)])
def test_paper_presets_build_table_3_models_by_default(preset, table_3):
    # One vocabulary, no `share_embeddings`: the paper's shared source/target/output matrix.
    model = kt.models.build(
        "translation",
        preset=preset,
        precision="float32",
        compile=False,
        source_vocabulary_size=37000,
    )
    assert model.share_embeddings and model.target_embedding is model.source_embedding
    assert (model.num_encoder_layers, model.num_decoder_layers) == (6, 6)
    # Table 3 rounds (base 63.1M -> 65M, big 214.2M -> 213M) and its tokenizer differs.
    expected = {"base": 63_082_496, "big": 214_245_376}[preset]
    assert model.count_params() == model.build_info["num_params"] == expected
    assert expected == transformer_parameter_count(PRESETS[preset], 37000)
    assert abs(expected - table_3) / table_3 < 0.03


def test_two_vocabularies_get_two_embeddings():
    def build(**vocabularies):
        return kt.models.build(
            "translation", preset="tiny", compile=False, source_vocabulary_size=100, **vocabularies
        )

    model = build(target_vocabulary_size=120)
    assert not model.share_embeddings
    assert model.target_embedding is not model.source_embedding
    unshared = build(share_embeddings=False)
    shared = build()
    assert unshared.count_params() - shared.count_params() == 100 * 128
    with pytest.raises(
        ValueError,
        match=r"share_embeddings=True.*source_vocabulary_size=100.*"
        r"target_vocabulary_size=120.*share_embeddings=False",
    ):
        build(target_vocabulary_size=120, share_embeddings=True)


# What `build` picks per situation, written out (not recomputed with the code under test):
# the precision, and `jit_compile` under each Keras backend (the test checks the column of
# the backend it runs on).
AUTO_RULES = [
    # id, device, precision, jit on tensorflow, jax, torch
    ("gpu_cc8", AMPERE, "mixed_bfloat16", True, True, False),
    ("gpu_cc7", VOLTA, "mixed_float16", True, True, False),
    ("gpu_unknown", DeviceInfo("gpu", "GPU: unknown"), "mixed_float16", True, True, False),
    # The host CPU's bfloat16 flags do not matter when a GPU trains.
    ("gpu_cc7_bf16_host", DeviceInfo("gpu", "GPU: V100", (7, 0), BF16_CPU.cpu_flags),
     "mixed_float16", True, True, False),
    ("tpu", DeviceInfo("tpu", "TPU"), "mixed_bfloat16", True, True, False),
    ("cpu", PLAIN_CPU, "float32", False, True, False),
    ("cpu_bf16", BF16_CPU, "mixed_bfloat16", False, True, False),
    ("cpu_amx", DeviceInfo("cpu", "CPU: test", None, frozenset({"amx_bf16"})),
     "mixed_bfloat16", False, True, False),
]  # fmt: skip


@pytest.mark.parametrize(
    "info, precision, jit_tf, jit_jax, jit_torch",
    [case[1:] for case in AUTO_RULES],
    ids=[case[0] for case in AUTO_RULES],
)
def test_auto_rules(info, precision, jit_tf, jit_jax, jit_torch, device):
    device(info)
    assert choose_precision(info)[0] == precision
    for backend, jit in (("tensorflow", jit_tf), ("jax", jit_jax), ("torch", jit_torch)):
        assert choose_jit_compile(info, backend)[0] is jit, backend
    model = kt.models.build("translation", source_vocabulary_size=20, **SMALL)
    info_dict = model.build_info
    assert info_dict["precision"] == precision
    assert model.dtype_policy.name == precision
    assert keras.config.dtype_policy().name == "float32"  # the global policy is untouched
    assert info_dict["device"] == info.name
    expected_jit = {"tensorflow": jit_tf, "jax": jit_jax, "torch": jit_torch}[
        keras.backend.backend()
    ]
    assert info_dict["jit_compile"] is expected_jit and model.jit_compile is expected_jit
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) == (
        precision == "mixed_float16"
    )
    assert isinstance(_inner_optimizer(model)._learning_rate, NoamSchedule)


def test_jit_rules_per_backend():
    assert choose_jit_compile(PLAIN_CPU, "tensorflow")[0] is False
    assert choose_jit_compile(PLAIN_CPU, "jax")[0] is True
    assert choose_jit_compile(PLAIN_CPU, "torch")[0] is False
    assert choose_jit_compile(AMPERE, "tensorflow")[0] is True
    assert choose_jit_compile(AMPERE, "jax")[0] is True
    assert choose_jit_compile(AMPERE, "torch")[0] is False


# `/proc/cpuinfo` excerpts: x86 names the model first and lists "flags"; ARM says "Features".
CPUINFO_X86_BF16 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16
processor\t: 1
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16
"""
CPUINFO_X86_PLAIN = """processor\t: 0
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
flags\t\t: fpu sse2 avx2 avx512f
"""
CPUINFO_ARM = """processor\t: 0
Features\t: fp asimd evtstrm aes bf16
"""


@pytest.mark.parametrize(
    "cpuinfo, name, has_bf16, precision",
    [
        (CPUINFO_X86_BF16, "AMD EPYC 9B14", True, "mixed_bfloat16"),
        (CPUINFO_X86_PLAIN, "Intel(R) Xeon(R) CPU @ 2.20GHz", False, "float32"),
        # ARM's "bf16" feature is not one of the x86 flags the rule knows.
        (CPUINFO_ARM, None, False, "float32"),
        (None, None, False, "float32"),  # no /proc/cpuinfo (not Linux)
    ],
    ids=["x86_avx512_bf16", "x86_plain", "arm", "no_cpuinfo"],
)
def test_auto_precision_from_the_cpu_flags(cpuinfo, name, has_bf16, precision, monkeypatch):
    """The CPU feature detection itself, from a pretended `/proc/cpuinfo`, through `build`."""
    import io

    def fake_open(path, *args, **kwargs):
        assert path == "/proc/cpuinfo"
        if cpuinfo is None:
            raise FileNotFoundError(path)
        return io.StringIO(cpuinfo)

    monkeypatch.setattr(device_module, "open", fake_open, raising=False)
    _, flags = device_module._cpu_info()
    assert ("avx512_bf16" in flags) == has_bf16
    real = device_module.detect_device()
    if real.platform != "cpu":
        pytest.skip(f"an accelerator is present ({real.name}): the CPU rule does not apply")
    assert real.cpu_has_native_bf16 is has_bf16
    if name is not None:
        assert real.name.startswith(f"CPU: {name} (")
    model = kt.models.build("translation", compile=False, source_vocabulary_size=20, **SMALL)
    assert model.build_info["precision"] == precision
    assert model.dtype_policy.name == precision


def test_explicit_choices_are_honoured(device):
    device(AMPERE)
    model = kt.models.build(
        "language_modeling",
        vocabulary_size=20,
        precision="float32",
        jit_compile=False,
        **SMALL,
    )
    assert model.build_info["precision"] == "float32"
    assert model.build_info["precision_reason"] == "requested"
    assert model.build_info["jit_compile"] is False and model.jit_compile is False


def test_build_info_and_summary_line(device, capsys):
    model = kt.models.build("translation", preset="tiny", source_vocabulary_size=20)
    info = model.build_info
    assert set(info) >= {
        "task",
        "preset",
        "precision",
        "precision_reason",
        "jit_compile",
        "jit_compile_reason",
        "device",
        "num_params",
    }
    assert (info["task"], info["preset"]) == ("translation", "tiny")
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0
    assert "translation / tiny" in line and "precision=float32" in line


def test_detect_device_on_this_machine():
    info = device_module.detect_device()
    assert info.platform in ("cpu", "gpu", "tpu")
    assert isinstance(info.name, str) and info.name


@pytest.mark.parametrize(
    "value, expected",
    [("8.0", (8, 0)), ("7.5", (7, 5)), ((9, 0), (9, 0)), (None, None), ("gfx90a", None)],
)
def test_parse_capability(value, expected):
    assert device_module._parse_capability(value) == expected


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(task="speech", source_vocabulary_size=10), r"`task`.*'translation'"),
        (dict(task="translation", preset="huge", source_vocabulary_size=10), r"`preset`.*'big'"),
        (dict(task="translation", precision="fp16", source_vocabulary_size=10), r"`precision`"),
        (dict(task="translation", jit_compile="yes", source_vocabulary_size=10), "jit_compile"),
        (dict(task="translation", compile="yes", source_vocabulary_size=10), "`compile`"),
        (dict(task="translation", source_vocabulary_size=10, num_clases=2), r"num_clases.*Valid"),
        (dict(task="translation", source_vocabulary_size=10, dtype="float16"), "precision"),
        (dict(task="translation"), "source_vocabulary_size"),
        (dict(task="classification", vocabulary_size=10), "num_classes"),
        (dict(task="language_modeling"), "vocabulary_size"),
    ],
    ids=[
        "task",
        "preset",
        "precision",
        "jit",
        "compile",
        "unknown_key",
        "dtype",
        "no_vocabulary",
        "no_classes",
        "no_lm_vocabulary",
    ],
)
def test_errors(kwargs, match, device):
    with pytest.raises(ValueError, match=match):
        kt.models.build(**kwargs)


def test_unknown_key_error_lists_valid_keys(device):
    with pytest.raises(ValueError) as error:
        kt.models.build("classification", vocabulary_size=10, num_classes=2, share_embeddings=True)
    message = str(error.value)
    assert "share_embeddings" in message and "pooling" in message and "warmup_steps" in message


def test_built_model_saves_and_loads(device, tmp_path, rng):
    model = kt.models.build(
        "translation", preset="tiny", source_vocabulary_size=30, precision="mixed_bfloat16"
    )
    assert isinstance(model.build_info, dict)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    assert isinstance(loaded.optimizer._learning_rate, NoamSchedule)
    assert isinstance(loaded.loss, LabelSmoothedCrossEntropy)
    x = {
        "encoder_token_ids": rng.integers(1, 30, (2, 6)).astype("int32"),
        "decoder_token_ids": rng.integers(1, 30, (2, 4)).astype("int32"),
    }
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
