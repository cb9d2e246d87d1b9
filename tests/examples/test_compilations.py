"""A short JAX fit on fixed-shape batches compiles its steps at most once per documented shape."""

import json
import os

import pytest

from examples.compilations import CompilationCounter
from tests.fresh_python import REPOSITORY, run_python

# Pairs of 2 to 32 tokens in batches of 256 tokens: 3 documented shapes (16, 24 and 32
# tokens), where the buckets of `length_bucket_boundaries` bring about 20 training shapes.
FIT = """
import json
import keras
import keras_transformer as kt
from examples.compilations import CompilationCounter
from examples.translation.data import load_multi30k
from keras_transformer.text import SubwordTokenizer, make_translation_dataset
from keras_transformer.text import translation_batch_shapes

pairs = load_multi30k("train", limit=360)
tokenizer = SubwordTokenizer.train([t for pair in pairs for t in pair], vocabulary_size=500)
model = kt.models.build(
    "translation", preset="tiny", precision="float32", jit_compile=True,
    source_vocabulary_size=tokenizer.vocabulary_size, num_layers=1, hidden_dim=16,
    intermediate_dim=32, num_heads=2)

def data(part, fixed_shapes):
    return make_translation_dataset(
        part, tokenizer, tokens_per_batch=256, max_length=32, shuffle=True, seed=0,
        fixed_shapes=fixed_shapes)

def shapes(dataset):
    return len({tuple(labels.shape) for _, labels in dataset})

train, val = data(pairs[:300], True), data(pairs[300:], True)
counter = CompilationCounter()
model.fit(train, validation_data=val, epochs=2, callbacks=[counter], verbose=0)
print(json.dumps({
    "epochs": counter.epochs,
    "documented": len(translation_batch_shapes(256, 32)),
    "train_shapes": shapes(train),
    "val_shapes": shapes(val),
    "unfixed_train_shapes": shapes(data(pairs[:300], False)),
}))
"""


# A fresh JAX process with TensorFlow, a tokenizer and a fit: 27 s of the suite's budget.
@pytest.mark.slow
def test_a_jax_fit_compiles_once_per_documented_shape():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(REPOSITORY))
    result = run_python("-c", FIT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    first, second = report["epochs"]
    assert report["documented"] == 3
    # The same data without fixed shapes would compile many more times.
    assert report["unfixed_train_shapes"] > 2 * report["documented"]
    assert first["train"] == report["train_shapes"] <= report["documented"]
    assert first["test"] == report["val_shapes"] <= report["documented"]
    # Every shape met in the first epoch: the second compiles nothing.
    assert second["train"] == second["test"] == 0
    assert first["train_seconds"] > 0


def test_counter_counts_nothing_off_jax():
    counter = CompilationCounter()
    counter.available = False  # as on TensorFlow or PyTorch
    counter.on_train_begin()
    counter.on_epoch_begin(0)
    counter.on_epoch_end(0)
    counter.on_train_end()
    assert counter.total == (0, 0)
    assert counter.summary()[0].startswith("epoch 1: ") and "compiled" not in counter.summary()[0]


@pytest.mark.parametrize(
    "name, step",
    [("jit(train_step)", "train"), ("jit(test_step)", "test"), ("jit(predict_step)", None)],
)
def test_counter_counts_the_steps_compile_events(name, step):
    counter = CompilationCounter()
    counter.on_epoch_begin(0)
    counter._record("/jax/core/compile/backend_compile_duration", 2.5, fun_name=name)
    counter._record("/jax/core/compile/jaxpr_trace_duration", 1.0, fun_name=name)
    counter.on_epoch_end(0)
    epoch = counter.epochs[0]
    assert (epoch["train"], epoch["test"]) == (int(step == "train"), int(step == "test"))
    assert epoch["train_seconds"] + epoch["test_seconds"] == (2.5 if step else 0.0)


def test_counter_counts_steps_loaded_from_the_compilation_cache_apart():
    counter = CompilationCounter()
    counter.available = True  # as on JAX
    load = "/jax/compilation_cache/cache_retrieval_time_sec"
    compile_event = "/jax/core/compile/backend_compile_duration"
    counter.on_epoch_begin(0)
    # JAX records a load inside the compile event of the same program.
    for name in ("jit(train_step)", "jit(test_step)", "jit(helper)"):
        counter._record(load, 0.05)
        counter._record(compile_event, 0.25, fun_name=name)
    counter.on_epoch_end(0)
    counter.on_epoch_begin(1)
    counter._record(compile_event, 2.5, fun_name="jit(test_step)")  # a new shape
    counter.on_epoch_end(1)
    first, second = counter.epochs
    assert (first["train"], first["test"], first["loaded"]) == (0, 0, 2)
    assert first["loaded_seconds"] == 0.5 and first["train_seconds"] == 0.0
    assert (second["train"], second["test"], second["loaded"]) == (0, 1, 0)
    assert counter.total == (0, 1)
    first, second = counter.summary()
    assert first.endswith(
        "the test step 0 times (0.0 s); loaded the steps 2 times from the compilation cache (0.5 s)"
    )
    assert second.endswith("the test step 1 times (2.5 s)")
