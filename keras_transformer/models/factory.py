"""`build`: a Transformer of a named size for a task, compiled with the paper's recipe."""

import contextlib
import dataclasses
import inspect
import logging
import os
import platform

import keras

from keras_transformer.distribution.mesh import format_mesh, make_distribution
from keras_transformer.models.electra_pretrainer import ElectraPretrainer
from keras_transformer.models.masked_lm import MaskedLM
from keras_transformer.models.presets import PRESET_FIELDS, PRESETS
from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.models.transformer_classifier import TransformerClassifier
from keras_transformer.models.transformer_lm import TransformerLM
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.optimizers import paper_optimizer
from keras_transformer.validation import check_bool, is_real

TASKS = {
    "translation": Seq2SeqTransformer,
    "classification": TransformerClassifier,
    "language_modeling": TransformerLM,
    "masked_lm": MaskedLM,
    "replaced_token_detection": ElectraPretrainer,
}
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# The arguments `build` cannot guess: vocabulary sizes and the number of classes.
REQUIRED = {
    "translation": ("source_vocabulary_size",),
    "classification": ("vocabulary_size", "num_classes"),
    "language_modeling": ("vocabulary_size",),
    "masked_lm": ("vocabulary_size",),
    "replaced_token_detection": ("vocabulary_size",),
}
# CPU flags of native bfloat16 arithmetic (x86: AVX-512 BF16 dot products, AMX tiles).
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """The accelerator (or CPU) that `build` picks precision and XLA for.

    Args:
        platform: `"cpu"`, `"gpu"` or `"tpu"`.
        name: str, a human-readable description of the device.
        compute_capability: `(major, minor)` of an NVIDIA GPU, or `None` when
            not a CUDA GPU or unknown. Defaults to `None`.
        cpu_flags: frozenset of the host CPU's feature flags (from
            `/proc/cpuinfo` on Linux; empty elsewhere). Defaults to empty.

    Example:

    >>> from keras_transformer.models.factory import DeviceInfo
    >>> DeviceInfo("cpu", "CPU: Zen 4", cpu_flags=frozenset({"avx512_bf16"})).cpu_has_native_bf16
    True
    >>> DeviceInfo("gpu", "GPU: V100", (7, 0)).compute_capability
    (7, 0)
    """

    platform: str
    name: str
    compute_capability: tuple | None = None
    cpu_flags: frozenset = frozenset()

    @property
    def cpu_has_native_bf16(self):
        return bool(CPU_BF16_FLAGS & self.cpu_flags)


def _parse_capability(value):
    """`"8.0"`, `(8, 0)` or `None` → `(8, 0)` or `None` (ROCm reports `gfx...` names)."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            major, _, minor = value.partition(".")
            return int(major), int(minor or 0)
        major, minor = tuple(value)[:2]
        return int(major), int(minor)
    except (TypeError, ValueError):
        return None


def _cpu_info():
    """`(description, flags)` of the host CPU; flags are empty where `/proc/cpuinfo` is absent."""
    model_name, flags = None, frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model_name is None:
                    model_name = value.strip()
                elif key in ("flags", "Features"):  # the x86 and the ARM spelling
                    flags = frozenset(value.split())
                    break  # every core lists the same flags; x86 names the model first
    except OSError:
        pass  # Not Linux: no flags, hence no claim of native bfloat16.
    name = model_name or platform.processor() or platform.machine() or "unknown"
    return f"CPU: {name} ({os.cpu_count()} cores)", flags


def detect_device():
    """Returns a `DeviceInfo` for the first device of the current Keras backend.

    TensorFlow: `tf.config.list_physical_devices` and, for GPUs,
    `tf.config.experimental.get_device_details`; JAX: `jax.devices()[0]`;
    PyTorch: `torch.cuda`. Anything unrecognised counts as the CPU.

    Returns:
        A `DeviceInfo`.

    Example:

    >>> from keras_transformer.models.factory import detect_device
    >>> detect_device().platform in ("cpu", "gpu", "tpu")  # "cpu" without accelerators
    True
    """
    cpu_name, cpu_flags = _cpu_info()
    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform in ("gpu", "tpu"):
                return DeviceInfo(
                    device.platform,
                    f"{device.platform.upper()}: {device.device_kind}",
                    _parse_capability(getattr(device, "compute_capability", None)),
                    cpu_flags,
                )
        elif backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                details = tf.config.experimental.get_device_details(gpus[0])
                return DeviceInfo(
                    "gpu",
                    f"GPU: {details.get('device_name', gpus[0].name)}",
                    _parse_capability(details.get("compute_capability")),
                    cpu_flags,
                )
            if tf.config.list_physical_devices("TPU"):
                return DeviceInfo("tpu", "TPU", None, cpu_flags)
        elif backend == "torch":
            import torch

            if torch.cuda.is_available():
                return DeviceInfo(
                    "gpu",
                    f"GPU: {torch.cuda.get_device_name(0)}",
                    _parse_capability(torch.cuda.get_device_capability(0)),
                    cpu_flags,
                )
    except (RuntimeError, ValueError) as error:
        # A broken driver or runtime: fall back to the CPU rather than fail the build.
        cpu_name = f"{cpu_name}; accelerator detection failed: {error}"
    return DeviceInfo("cpu", cpu_name, None, cpu_flags)


def choose_precision(device):
    """The `"auto"` dtype policy for `device`, and why.

    - GPU of compute capability 8.0 or higher (Ampere on), TPU:
      `"mixed_bfloat16"`: native bfloat16 with float32's range, no loss scaling.
    - Other GPUs (or unknown capability): `"mixed_float16"`, trained with a
      `keras.optimizers.LossScaleOptimizer`.
    - CPU: `"mixed_bfloat16"` if its flags include `avx512_bf16` or
      `amx_bf16` (a training step is faster there in bfloat16, see
      `benchmarks/RESULTS.md`), else `"float32"` (bfloat16 would be emulated,
      and slower).

    Args:
        device: a `DeviceInfo`.

    Returns:
        `(policy_name, reason)`.

    Example:

    >>> from keras_transformer.models.factory import DeviceInfo, choose_precision
    >>> choose_precision(DeviceInfo("gpu", "GPU: V100", (7, 0)))
    ('mixed_float16', 'GPU compute capability 7.0 < 8.0 lacks fast bfloat16')
    >>> choose_precision(DeviceInfo("gpu", "GPU: A100", (8, 0)))[0]
    'mixed_bfloat16'
    >>> choose_precision(DeviceInfo("cpu", "CPU", cpu_flags=frozenset({"avx2"})))[0]
    'float32'
    """
    if device.platform == "tpu":
        return "mixed_bfloat16", "TPUs compute natively in bfloat16"
    if device.platform == "gpu":
        capability = device.compute_capability
        if capability is not None and capability >= (8, 0):
            return (
                "mixed_bfloat16",
                f"GPU compute capability {capability[0]}.{capability[1]} >= 8.0",
            )
        if capability is None:
            return "mixed_float16", "GPU of unknown compute capability: float16 runs on all GPUs"
        return (
            "mixed_float16",
            f"GPU compute capability {capability[0]}.{capability[1]} < 8.0 lacks fast bfloat16",
        )
    if device.cpu_has_native_bf16:
        flags = ", ".join(sorted(CPU_BF16_FLAGS & device.cpu_flags))
        return "mixed_bfloat16", f"CPU with native bfloat16 ({flags})"
    return "float32", "CPU without native bfloat16 (avx512_bf16 / amx_bf16)"


def choose_jit_compile(device, backend=None):
    """The `"auto"` `jit_compile` for `device` and a Keras backend, and why.

    - GPU or TPU: `True` (XLA fuses the many small ops of attention and
      normalisation), except on PyTorch, whose `torch.compile` path in Keras
      is still experimental.
    - CPU: `True` on JAX, where `False` would run op by op; `False` on
      TensorFlow (XLA made a training step 5% slower in float32 and 70%
      slower in mixed_bfloat16 on a Zen 4 CPU) and PyTorch.

    Args:
        device: a `DeviceInfo`.
        backend: str, the Keras backend. Defaults to `keras.backend.backend()`.

    Returns:
        `(jit_compile, reason)`.

    Example:

    >>> from keras_transformer.models.factory import DeviceInfo, choose_jit_compile
    >>> choose_jit_compile(DeviceInfo("cpu", "CPU"), backend="tensorflow")
    (False, 'TensorFlow on CPU: XLA trains slower than the default runtime')
    >>> choose_jit_compile(DeviceInfo("cpu", "CPU"), backend="jax")[0]
    True
    >>> choose_jit_compile(DeviceInfo("gpu", "GPU: A100", (8, 0)), backend="tensorflow")
    (True, 'XLA on GPU')
    """
    backend = backend or keras.backend.backend()
    if backend == "torch":
        return False, "torch.compile support in Keras is experimental"
    if device.platform in ("gpu", "tpu"):
        return True, f"XLA on {device.platform.upper()}"
    if backend == "jax":
        return True, "JAX on CPU: without jit every op runs eagerly"
    return False, "TensorFlow on CPU: XLA trains slower than the default runtime"


def _model_arguments(model_cls):
    parameters = inspect.signature(model_cls.__init__).parameters
    names = [
        name
        for name, p in parameters.items()
        if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return names + ["name"]


def _check_choice(argument, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"Unknown `{argument}`: {value!r}. Expected one of: "
            f"{', '.join(repr(c) for c in choices)}."
        )


def _model_kwargs(task, preset_values, overrides, model_arguments):
    sizes = {
        "hidden_dim": preset_values["hidden_dim"],
        "intermediate_dim": preset_values["intermediate_dim"],
        "num_heads": preset_values["num_heads"],
        "dropout": preset_values["dropout"],
    }
    if task == "translation":
        sizes["num_encoder_layers"] = preset_values["num_layers"]
        sizes["num_decoder_layers"] = preset_values["num_layers"]
    else:
        sizes["num_layers"] = preset_values["num_layers"]
    # A model argument given explicitly (e.g. `num_encoder_layers`) wins over the preset.
    sizes.update({k: v for k, v in overrides.items() if k in model_arguments})
    return sizes


def _share_embeddings(overrides):
    """The paper's translation models share one matrix across a shared vocabulary (3.4)."""
    source = overrides["source_vocabulary_size"]
    target = overrides.get("target_vocabulary_size")
    one_vocabulary = target is None or target == source
    share = overrides.get("share_embeddings", one_vocabulary)
    if share and not one_vocabulary:
        raise ValueError(
            "`share_embeddings=True` needs one vocabulary for source and target. Received: "
            f"source_vocabulary_size={source}, target_vocabulary_size={target}. Drop "
            "`target_vocabulary_size` for a shared vocabulary, or pass share_embeddings=False."
        )
    return share


def _loss_and_metrics(task, label_smoothing, pad_id):
    if task == "classification":
        if label_smoothing:
            # `(batch,)` labels against `(batch, num_classes)` logits; no padding here.
            loss = LabelSmoothedCrossEntropy(label_smoothing, pad_id=None)
        else:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return loss, [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    if task == "replaced_token_detection":
        # The model computes its loss (`ElectraPretrainer.compute_loss`); the metric scores
        # the generator's predictions of the masked tokens.
        return None, [MaskedAccuracy(pad_id)]
    return LabelSmoothedCrossEntropy(label_smoothing, pad_id=pad_id), [MaskedAccuracy(pad_id)]


def _distribution_context(distribution):
    """Where the model's variables are created: under the distribution, if any."""
    if distribution is None:
        return contextlib.nullcontext()
    if isinstance(
        distribution, (keras.distribution.DataParallel, keras.distribution.ModelParallel)
    ):
        # Global rather than a scope: `fit`, `evaluate` and `predict` split batches by it.
        keras.distribution.set_distribution(distribution)
        return contextlib.nullcontext()
    return distribution.scope()  # a tf.distribute.Strategy: the model keeps it


def build(
    task,
    preset="base",
    precision="auto",
    jit_compile="auto",
    compile=True,
    mesh=None,
    **overrides,
):
    """Builds a Transformer for a task at a preset size, compiled with the paper's recipe.

    The model is a [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer]
    (`"translation"`), a
    [`TransformerClassifier`][keras_transformer.models.TransformerClassifier]
    (`"classification"`), a [`TransformerLM`][keras_transformer.models.TransformerLM]
    (`"language_modeling"`), a [`MaskedLM`][keras_transformer.models.MaskedLM]
    (`"masked_lm"`) or an
    [`ElectraPretrainer`][keras_transformer.models.ElectraPretrainer]
    (`"replaced_token_detection"`) with the sizes of `preset` (see
    [`PRESETS`][keras_transformer.models.PRESETS]), computing in the dtype policy
    `precision`. With `compile=True` it is compiled with the paper's training
    recipe: Adam (β1 0.9, β2 0.98, ε 1e-9) on the warmup / inverse square-root
    schedule ([`paper_optimizer`][keras_transformer.training.paper_optimizer]);
    label-smoothed cross-entropy that ignores `pad_id` and
    [`MaskedAccuracy`][keras_transformer.training.MaskedAccuracy] for
    translation and language modelling (for the masked LM too, without
    smoothing: label `pad_id` marks the positions that were not masked), plain
    sparse categorical cross-entropy and accuracy for classification; the
    ELECTRA pretrainer computes its own loss (`loss=None`) and `MaskedAccuracy`
    scores its generator. Under `"mixed_float16"` the optimizer is wrapped in a
    `keras.optimizers.LossScaleOptimizer`.

    `"auto"` settings follow the device of the current backend
    (`detect_device`): see `choose_precision` and `choose_jit_compile`. The
    choices, the reasons, the device and the parameter count are kept in
    `model.build_info` and printed in one line.

    Args:
        task: `"translation"`, `"classification"`, `"language_modeling"`,
            `"masked_lm"` or `"replaced_token_detection"`.
        preset: `"tiny"`, `"small"`, `"base"` or `"big"`. Defaults to `"base"`.
        precision: `"auto"`, `"float32"`, `"mixed_bfloat16"` or
            `"mixed_float16"`, the model's dtype policy (the global policy is
            left alone). Defaults to `"auto"`.
        jit_compile: `"auto"`, `True` or `False`, passed to `compile`.
            Defaults to `"auto"`.
        compile: bool, whether to compile the model. Defaults to `True`.
        mesh: `None`, or a device mesh shape `(data, model)`: `"4x2"`, `"8"`
            (data parallel) or a tuple. The model is created and compiled
            under `make_distribution(mesh, ...)`
            ([`keras_transformer.distribution.make_distribution`][]):
            on JAX a `keras.distribution.DataParallel` or `ModelParallel`
            (weights split over `model` devices by
            [`get_layout_map`][keras_transformer.distribution.get_layout_map]),
            made Keras' global distribution
            (`keras.distribution.set_distribution`, which `fit` reads;
            `set_distribution(None)` undoes it); on TensorFlow a
            `tf.distribute.MirroredStrategy` (data parallel only), whose scope
            the model keeps. Batches must then divide by `data`. Defaults to
            `None` (one device, global state untouched).
        **overrides: arguments of the model class (required: the vocabulary
            sizes, and `num_classes` for classification) and preset fields
            (`num_layers`, `hidden_dim`, `intermediate_dim`, `num_heads`,
            `dropout`, `label_smoothing`, `warmup_steps`, `learning_rate_scale`),
            which replace the preset's values. A model argument wins over the
            preset field it derives from (e.g. `num_encoder_layers` over
            `num_layers`).
            `label_smoothing` applies to classification and the masked LM only
            when given here. A translation model with one vocabulary
            (`target_vocabulary_size` omitted or equal to
            `source_vocabulary_size`) shares one embedding matrix between
            source, target and output, as the paper does (section 3.4), unless
            `share_embeddings=False` is passed: so `"base"` with a
            37000-token vocabulary has the 63.1M weights that Table 3 rounds
            to 65M (`"big"`: 214.2M, Table 3's 213M).

    Returns:
        The model, with a `build_info` dict attribute.

    Raises:
        ValueError: for an unknown `task`, `preset`, `precision` or override,
            a missing vocabulary size or `num_classes`, a `dtype` argument
            (pass `precision`), a `learning_rate_scale` that is not a positive
            number, or a `mesh` the devices cannot hold.

    Example:

    A translation model of the `"tiny"` preset, made smaller still by
    overrides; `build` prints what it chose (the device part of the line
    depends on the machine):

    >>> from keras_transformer.models import build
    >>> model = build("translation", preset="tiny", source_vocabulary_size=100,
    ...               num_layers=1, hidden_dim=16, intermediate_dim=32,
    ...               num_heads=2, precision="float32")
    keras_transformer.models.build: translation / tiny, 7,168 parameters, ...
    >>> type(model).__name__, model.build_info["precision"]
    ('Seq2SeqTransformer', 'float32')
    >>> logits = model({"encoder_token_ids": keras.ops.ones((2, 7), "int32"),
    ...                 "decoder_token_ids": keras.ops.ones((2, 5), "int32")})
    >>> tuple(logits.shape)
    (2, 5, 100)

    The model is compiled with the paper's recipe, so `model.fit(dataset)`
    trains it on batches of `make_translation_dataset`:
    `({"encoder_token_ids", "decoder_token_ids"}, labels)`.
    """
    model_cls, model_arguments = _check_build_arguments(
        task, preset, precision, jit_compile, compile, overrides
    )
    preset_values = _preset_values(task, preset, overrides)

    device = detect_device()
    backend = keras.backend.backend()
    if precision == "auto":
        precision, precision_reason = choose_precision(device)
    else:
        precision_reason = "requested"
    if jit_compile == "auto":
        jit_compile, jit_reason = choose_jit_compile(device, backend)
    else:
        jit_reason = "requested"

    kwargs = _model_kwargs(task, preset_values, overrides, model_arguments)
    if task == "translation":
        kwargs["share_embeddings"] = _share_embeddings(overrides)
    # Checked (mesh against devices and heads) before anything is created.
    distribution = None if mesh is None else make_distribution(mesh, kwargs)
    with _distribution_context(distribution):
        model = _create_and_compile(
            model_cls, kwargs, precision, compile, preset_values, task, jit_compile
        )

    model.build_info = {
        "task": task,
        "preset": preset,
        "backend": backend,
        "device": device.name,
        "precision": precision,
        "precision_reason": precision_reason,
        "jit_compile": jit_compile,
        "jit_compile_reason": jit_reason,
        "num_params": model.count_params(),
        "compiled": compile,
        "mesh": None if mesh is None else format_mesh(mesh),
        "distribution": None if distribution is None else type(distribution).__name__,
    }
    placement = (
        ""
        if distribution is None
        else f"; mesh={model.build_info['mesh']} ({model.build_info['distribution']})"
    )
    _report(
        f"keras_transformer.models.build: {task} / {preset}, "
        f"{model.build_info['num_params']:,} parameters, {backend} on {device.name}; "
        f"precision={precision} ({precision_reason}); "
        f"jit_compile={jit_compile} ({jit_reason}){placement}"
    )
    return model


def _check_build_arguments(task, preset, precision, jit_compile, compile, overrides):
    """`build`'s checks, each naming the argument and the fix; returns the model class and
    the names of its arguments."""
    _check_choice("task", task, tuple(TASKS))
    _check_choice("preset", preset, tuple(PRESETS))
    _check_choice("precision", precision, ("auto",) + PRECISIONS)
    if not (jit_compile == "auto" or isinstance(jit_compile, bool)):
        raise ValueError(
            f"`jit_compile` must be 'auto', True or False. Received: jit_compile={jit_compile!r}."
        )
    check_bool("compile", compile)
    if "dtype" in overrides:
        raise ValueError(
            f"Pass the dtype policy as `precision`, not `dtype`. Received: "
            f"dtype={overrides['dtype']!r}. Use e.g. precision='mixed_bfloat16'."
        )

    model_cls = TASKS[task]
    model_arguments = _model_arguments(model_cls)
    valid = sorted(set(model_arguments) | set(PRESET_FIELDS))
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ValueError(
            f"Unknown argument{'s' if len(unknown) > 1 else ''} for task {task!r}: "
            f"{', '.join(unknown)}. Valid overrides: {', '.join(valid)}."
        )
    missing = [name for name in REQUIRED[task] if overrides.get(name) is None]
    if missing:
        raise ValueError(
            f"Task {task!r} needs {' and '.join(f'`{m}`' for m in missing)}, which no preset "
            f"can supply. Pass e.g. build({task!r}, "
            + ", ".join(f"{m}={2 if m == 'num_classes' else 8000}" for m in missing)
            + ")."
        )
    return model_cls, model_arguments


def _preset_values(task, preset, overrides):
    """The preset's sizes and recipe, with the overrides of those fields applied."""
    preset_values = dict(PRESETS[preset])
    preset_values.update({k: v for k, v in overrides.items() if k in PRESET_FIELDS})
    scale = preset_values["learning_rate_scale"]
    if not is_real(scale) or not scale > 0:
        raise ValueError(
            f"`learning_rate_scale` must be a positive number. Received: "
            f"learning_rate_scale={scale!r}. Use 1.0 for the paper's schedule."
        )
    if (
        task in ("classification", "masked_lm", "replaced_token_detection")
        and "label_smoothing" not in overrides
    ):
        # Smoothing is the paper's, for translation; BERT pretrains without it.
        preset_values["label_smoothing"] = 0.0
    return preset_values


def _report(message):
    """Prints `message` as Keras prints its progress: to standard output, or to the log
    after `keras.config.disable_interactive_logging()`."""
    if keras.config.is_interactive_logging_enabled():
        print(message, flush=True)
    else:
        logging.getLogger(__name__).info(message)


def _create_and_compile(model_cls, kwargs, precision, compile, preset_values, task, jit_compile):
    model = model_cls(**kwargs, dtype=precision)
    if compile:
        optimizer = paper_optimizer(
            model.hidden_dim,
            preset_values["warmup_steps"],
            scale=preset_values["learning_rate_scale"],
        )
        if precision == "mixed_float16":
            # float16 gradients underflow without a (dynamic) loss scale.
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        loss, metrics = _loss_and_metrics(task, preset_values["label_smoothing"], model.pad_id)
        model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit_compile)
        # The model has its weights already, so the optimizer slots can be made now. Left to
        # `fit`, TensorFlow creates them inside the traced step and traces it twice (the
        # first `fit` of the tiny preset twice as long).
        model.optimizer.build(model.trainable_variables)
    return model
