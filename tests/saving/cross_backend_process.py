"""One process of the cross-backend matrix (test_cross_backend_matrix.py).

    KERAS_BACKEND=jax python tests/saving/cross_backend_process.py \
        [--load DIR --out OUT [--examples]] [--save DIR]

`--load DIR` loads each model directory of `DIR` with `load_pretrained` on this process's
backend, before anything else, and writes to `OUT/outputs.npz` their outputs on the inputs
the saving backend used and the ids of their greedy translations; `OUT/result.json` names
the optimizers it rebuilt and any module of another backend's private Keras code that
loading imported. With `--examples` the translations come from the examples' `translate`
command (its `main`), the classifier's labels from their `predict` command, both run on
`DIR`'s directories, the loaded classifier's `jit_compile` is compared with this backend's
default, it trains one more step (on TensorFlow and PyTorch), and on TensorFlow it is
exported with `export_serving`.

`--save DIR` (after any load) builds the four model classes small (one layer each side, 32
wide, a 96-piece vocabulary), compiles each with another optimizer (and builds its state),
and writes each with `save_pretrained` to `DIR/<model>`, with the tokenizer and the metadata
that the examples' `predict` and `translate` read. `DIR/reference.npz` holds the inputs,
the outputs and the greedy translation ids on the saving backend, `DIR/reference.json` the
labels and translations of the examples' functions there.

The process exits normally, its interpreter's teardown included: a crash there would be a
user's crash too. The test compares the numbers; this script only measures.
"""

import argparse
import contextlib
import io
import json
import pathlib
import sys
import time

STARTED = time.perf_counter()
BEFORE = set(sys.modules)

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for `examples`, a folder of the repository

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer.saving import load_pretrained, save_pretrained  # noqa: E402
from keras_transformer.text import SubwordTokenizer, tokenize_for_classification  # noqa: E402

IMPORTED = time.perf_counter()

MODELS = ("seq2seq", "classifier", "masked_lm", "lm")
SIZES = {"num_layers": 1, "hidden_dim": 32, "intermediate_dim": 64, "num_heads": 2}
VOCABULARY_SIZE = 96
LENGTH = 16  # of every input: on JAX each new shape compiles each operation again
CORPUS = [
    "a gorgeous, witty film",
    "a dull, lifeless mess",
    "the story drags but the actors shine",
    "A man rides a bike.",
    "Two dogs play in the snow.",
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch am Fenster.",
]
TEXTS = ["a gorgeous, witty film", "a dull, lifeless mess"]  # for predict
SENTENCES = ["A man rides a bike.", "Two dogs play in the snow."]  # for translate
LABELS = ["negative", "positive"]
PRIVATE = "keras.src.backend."
BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


@contextlib.contextmanager
def generations():
    """The ids returned by the `Seq2SeqTransformer.generate` calls made inside, in order: the
    examples' `translate` loads its own model and returns text only."""
    calls = []
    generate = kt.models.Seq2SeqTransformer.generate

    def recording(self, *args, **kwargs):
        ids = generate(self, *args, **kwargs)
        calls.append(np.asarray(ids))
        return ids

    kt.models.Seq2SeqTransformer.generate = recording
    try:
        yield calls
    finally:
        kt.models.Seq2SeqTransformer.generate = generate


def quietly(function, *args, **kwargs):
    """`function(*args, **kwargs)`, keeping what it prints out of the test's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        return function(*args, **kwargs)


def translate_greedily(model, tokenizer):
    """The examples' translations of SENTENCES with `--beam-size 1`, and their ids."""
    from examples.translation.translator import translate

    with generations() as ids:
        translations = translate(model, tokenizer, SENTENCES, beam_size=1)
    return translations, ids[-1]


def built_models(vocabulary_size):
    """The four models, compiled with four different optimizers."""
    from examples.text_classification.schedule import fine_tuning_optimizer

    common = dict(preset="tiny", precision="float32", jit_compile=False, **SIZES)
    models = {
        # Adam on the paper's schedule (a class of this library), as the translation example.
        "seq2seq": quietly(
            kt.models.build, "translation", source_vocabulary_size=vocabulary_size, **common
        ),
        "classifier": kt.models.TransformerClassifier(vocabulary_size, num_classes=2, **SIZES),
        "masked_lm": quietly(
            kt.models.build, "masked_lm", vocabulary_size=vocabulary_size, **common
        ),
        "lm": kt.models.TransformerLM(vocabulary_size, **SIZES),
    }
    models["classifier"].compile(  # as examples.text_classification.train does
        optimizer=fine_tuning_optimizer(1e-3, total_steps=100),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        ),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    models["masked_lm"].compile(
        optimizer=keras.optimizers.Nadam(1e-3), loss=models["masked_lm"].loss
    )
    models["lm"].compile(  # a wrapped optimizer: the inner one is in the config too
        optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01, momentum=0.9)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    # The optimizers' state (moments, step count), as a first training step makes it; the
    # step itself would take ~10 s a model to compile on JAX, and random weights are as
    # good a test of loading as trained ones.
    for model in models.values():
        model.optimizer.build(model.trainable_variables)
    return models


def inputs_of(tokenizer):
    """The inputs each model is called on."""
    rng = np.random.default_rng(0)
    ids = rng.integers(5, VOCABULARY_SIZE, size=(2, LENGTH)).astype("int32")
    ids[1, 11:] = 0  # padding
    texts = tokenize_for_classification(tokenizer, TEXTS, max_length=LENGTH)
    start = np.full((2, 1), tokenizer.start_id, "int32")
    return {
        "seq2seq": {
            "encoder_token_ids": ids,
            "decoder_token_ids": np.concatenate([start, ids[:, :-1]], axis=1),
        },
        "classifier": np.asarray(texts.to_tensor(default_value=0, shape=[None, LENGTH]), "int32"),
        "masked_lm": ids,
        "lm": ids,
    }


def outputs_of(models, inputs):
    return {
        f"{name}_outputs": keras.ops.convert_to_numpy(models[name](inputs[name])) for name in MODELS
    }


def top_two_gap(model, tokenizer, ids):
    """The smallest gap between the two best logits along greedy ids: how far each step was
    from a tie that float rounding on another backend could break the other way."""
    from examples.translation.translator import source_ids

    start = np.full((len(ids), 1), tokenizer.start_id, "int32")
    logits = model(
        {
            "encoder_token_ids": source_ids(tokenizer, SENTENCES),
            "decoder_token_ids": np.concatenate([start, ids], axis=1),
        }
    )
    logits = np.sort(keras.ops.convert_to_numpy(logits).astype("float64"), axis=-1)
    gaps = logits[..., -1] - logits[..., -2]
    lengths = [  # each row's tokens, its end token included
        list(row).index(tokenizer.end_id) + 1 if tokenizer.end_id in row else len(row)
        for row in ids
    ]
    return float(min(gaps[row, :length].min() for row, length in enumerate(lengths)))


def save(directory):
    from examples.text_classification.predict import predict

    keras.utils.set_random_seed(0)
    tokenizer = SubwordTokenizer.train(
        CORPUS * 4, vocabulary_size=VOCABULARY_SIZE, byte_fallback=False, mask_token=True
    )
    inputs = inputs_of(tokenizer)
    models = built_models(tokenizer.vocabulary_size)
    metadata = {  # what the examples' commands read
        "seq2seq": {"beam_size": 1, "length_penalty": 0.6},
        "classifier": {"task": "classification", "labels": LABELS, "max_length": LENGTH},
        "masked_lm": {},
        "lm": {},
    }
    for name in MODELS:
        save_pretrained(models[name], directory / name, tokenizer, metadata[name])
    arrays = outputs_of(models, inputs)
    translations, arrays["seq2seq_generated"] = translate_greedily(models["seq2seq"], tokenizer)
    for name in MODELS:
        given = inputs[name] if name == "seq2seq" else {"ids": inputs[name]}
        arrays.update({f"{name}_input_{key}": value for key, value in given.items()})
    np.savez(directory / "reference.npz", **arrays)
    classifier = kt.saving.Pretrained(models["classifier"], tokenizer, metadata["classifier"])
    reference = {
        "backend": keras.backend.backend(),
        "top_two_gap": top_two_gap(models["seq2seq"], tokenizer, arrays["seq2seq_generated"]),
        # The examples' own functions, on the models in memory.
        "predict": [list(row) for row in predict(classifier, TEXTS)],
        "translate": translations,
    }
    (directory / "reference.json").write_text(json.dumps(reference, indent=1), encoding="utf-8")


def backend_of(module):
    """`"torch"` for `keras.src.backend.torch.optimizers`, else `None`."""
    if not module.startswith(PRIVATE):
        return None
    name = module[len(PRIVATE) :].split(".")[0]
    return name if name in BACKENDS else None


def optimizer_classes(optimizer):
    names = [type(optimizer).__name__]
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        names += optimizer_classes(optimizer.inner_optimizer)
    return names


def load(directory, out, examples):
    reference = np.load(directory / "reference.npz")
    inputs = {}
    for name in MODELS:
        prefix = f"{name}_input_"
        given = {k[len(prefix) :]: reference[k] for k in reference.files if k.startswith(prefix)}
        inputs[name] = given if name == "seq2seq" else given["ids"]
    bundles = {name: load_pretrained(directory / name) for name in MODELS}
    models = {name: bundle.model for name, bundle in bundles.items()}
    here = keras.backend.backend()
    result = {
        "backend": here,
        "optimizers": {name: optimizer_classes(models[name].optimizer) for name in MODELS},
        "other_backend_modules": sorted(
            module for module in set(sys.modules) - BEFORE if backend_of(module) not in (None, here)
        ),
    }
    arrays = outputs_of(models, inputs)
    if examples:
        from examples.text_classification import predict
        from examples.translation import translate

        arguments = ["--model", str(directory / "classifier"), *TEXTS]
        result["predict"] = [list(row) for row in quietly(predict.main, arguments)]
        arguments = ["--model", str(directory / "seq2seq"), *SENTENCES]
        with generations() as ids:
            result["translate"] = quietly(translate.main, arguments)
        arrays["seq2seq_generated"] = ids[-1]
        if here == "tensorflow":  # what the examples' `train` exports, from a loaded model
            from keras_transformer.saving import export_serving

            serving = export_serving(
                models["classifier"], bundles["classifier"].tokenizer, out / "serving",
                max_length=LENGTH,
            )  # fmt: skip
            result["serving_files_naming_private_code"] = [
                str(path.relative_to(serving))
                for path in sorted(serving.rglob("*"))
                if path.is_file() and PRIVATE.encode() in path.read_bytes()
            ]
        classifier = models["classifier"]
        result["jit_compile"] = {  # as loaded, and this backend's default for the model
            "loaded": classifier.jit_compile,
            "default": type(classifier).from_config(classifier.get_config()).jit_compile,
        }
        if here != "jax":  # (a first step would take ~10 s to compile on JAX)
            # Training goes on where the model was loaded, with the optimizer rebuilt there.
            classifier.run_eagerly = True
            labels = np.array([0, 1], "int32")
            logs = classifier.train_on_batch(inputs["classifier"], labels, return_dict=True)
            result["loss_after_a_step"] = float(logs["loss"])
    else:
        _, arrays["seq2seq_generated"] = translate_greedily(
            models["seq2seq"], bundles["seq2seq"].tokenizer
        )
    np.savez(out / "outputs.npz", **arrays)
    (out / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--examples", action="store_true")
    parser.add_argument("--save", type=pathlib.Path)
    args = parser.parse_args()
    seconds = {"import": IMPORTED - STARTED}
    if args.load:
        load(args.load, args.out, args.examples)
        seconds["load"] = time.perf_counter() - STARTED - sum(seconds.values())
    if args.save:
        save(args.save)
        seconds["save"] = time.perf_counter() - STARTED - sum(seconds.values())
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
