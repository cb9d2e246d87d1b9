"""`build`: a Transformer of a named size for a task, compiled with the paper's recipe."""

import contextlib
import inspect
import logging

import keras

from keras_transformer.distribution.mesh import format_mesh, make_distribution
from keras_transformer.models.device import (
    CPU_BF16_FLAGS,
    DeviceInfo,
    choose_jit_compile,
    choose_precision,
    detect_device,
)
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

# The device probing lives in `device.py`; its names stay importable from here, where they
# were first published.
__all__ = [
    "CPU_BF16_FLAGS",
    "DeviceInfo",
    "build",
    "choose_jit_compile",
    "choose_precision",
    "detect_device",
]

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

    The model computes in the dtype policy `precision`. With `compile=True` it is
    compiled with the paper's optimizer and the task's loss and metric (see
    [the recipe for each task][the-recipe-for-each-task]). `"auto"` settings follow the
    device of the current backend (see [what "auto" chooses][what-auto-chooses]);
    `build` prints its choices and their reasons in one line.

    Args:
        task: `"translation"`
            ([`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer]),
            `"classification"`
            ([`TransformerClassifier`][keras_transformer.models.TransformerClassifier]),
            `"language_modeling"` ([`TransformerLM`][keras_transformer.models.TransformerLM]),
            `"masked_lm"` ([`MaskedLM`][keras_transformer.models.MaskedLM]) or
            `"replaced_token_detection"`
            ([`ElectraPretrainer`][keras_transformer.models.ElectraPretrainer]).
        preset: `"tiny"`, `"small"`, `"base"` or `"big"`, a key of
            [`PRESETS`][keras_transformer.models.PRESETS]. Defaults to `"base"`.
        precision: `"auto"`, `"float32"`, `"mixed_bfloat16"` or
            `"mixed_float16"`, the model's dtype policy (the global policy is
            left alone). Defaults to `"auto"`.
        jit_compile: `"auto"`, `True` or `False`, passed to `compile`.
            Defaults to `"auto"`.
        compile: bool, whether to compile the model. Defaults to `True`.
        mesh: `None`, or a device mesh shape `(data, model)`: `"4x2"`, `"8"`
            (data parallel) or a tuple; batches must then divide by `data`. The
            model is created under
            [`make_distribution(mesh, ...)`][keras_transformer.distribution.make_distribution],
            which on JAX becomes Keras' global distribution
            (`keras.distribution.set_distribution(None)` undoes it); see
            [training on many devices][training-on-many-devices]. Defaults to
            `None` (one device, global state untouched).
        **overrides: arguments of the model class (required: the vocabulary
            sizes, and `num_classes` for classification) and preset fields
            (`num_layers`, `hidden_dim`, `intermediate_dim`, `num_heads`,
            `dropout`, `label_smoothing`, `warmup_steps`, `learning_rate_scale`),
            which replace the preset's values. A model argument wins over the
            preset field it derives from (e.g. `num_encoder_layers` over
            `num_layers`). A translation model with one vocabulary shares its
            embeddings unless `share_embeddings=False` is passed.

    Returns:
        The model, with a `build_info` dict attribute: the task, preset,
        backend, device, precision and `jit_compile` (each with its reason),
        parameter count and mesh.

    Raises:
        ValueError: for an unknown `task`, `preset`, `precision` or override,
            a missing vocabulary size or `num_classes`, a `dtype` argument
            (pass `precision`), a `learning_rate_scale` that is not a positive
            number, or a `mesh` the devices cannot hold.

    Example:

    The line `build` prints goes on with the backend and device, which vary by machine:

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
