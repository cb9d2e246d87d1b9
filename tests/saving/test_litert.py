"""`model.export(path, format="litert")` files on LiteRT's builtin operators, without Flex.

Each file is loaded with the builtin-operator resolver, which refuses a file holding a
TensorFlow (Flex) operator when it allocates its tensors, as a phone without the
select-ops library would; the outputs are compared with Keras's at two batch sizes and
lengths (one file serves any).
"""

import keras
import numpy as np
import pytest

from keras_transformer.models import MaskedLM, TransformerClassifier, TransformerLM

tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="LiteRT files are written from TensorFlow"
)

SMALL = dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0)
VOCABULARY = 50


def builtin_runner(path):
    interpreter = tf.lite.Interpreter(
        str(path), experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN
    )
    runner = interpreter.get_signature_runner()
    (name,) = runner.get_input_details()
    return lambda ids: next(iter(runner(**{name: ids}).values()))


def export(model, path, **options):
    if isinstance(model, (TransformerClassifier, TransformerLM)):
        model.export(str(path), format="litert", verbose=False, **options)
    else:  # a functional encoder: Keras reads its inputs
        signature = [keras.InputSpec(shape=(None, None), dtype="int32")]
        model.export(
            str(path), format="litert", verbose=False, input_signature=signature, **options
        )
    return builtin_runner(path)


MODELS = {
    "classifier": lambda: TransformerClassifier(VOCABULARY, num_classes=3, **SMALL),
    "lm": lambda: TransformerLM(VOCABULARY, **SMALL),
    "masked_lm_encoder": lambda: MaskedLM(VOCABULARY, **SMALL).encoder,
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_litert_file_runs_on_builtin_operators_and_matches_keras(name, tmp_path):
    model = MODELS[name]()
    run = export(model, tmp_path / "model.tflite")
    rng = np.random.default_rng(0)
    for shape in ((2, 9), (3, 4)):
        ids = rng.integers(1, VOCABULARY, shape).astype("int32")
        ids[0, -2:] = 0  # padding, masked inside the file as in Keras
        expected = keras.ops.convert_to_numpy(model(ids, training=False))
        np.testing.assert_allclose(run(ids), expected, atol=1e-5, rtol=1e-5)


def test_int8_weights_keep_the_accuracy_of_float32(tmp_path):
    # A task the tiny model learns in a few epochs: does token 7 occur in the sequence?
    rng = np.random.default_rng(1)
    ids = rng.integers(8, VOCABULARY, (640, 8)).astype("int32")
    labels = rng.integers(0, 2, 640)
    ids[labels == 1, rng.integers(0, 8, int(labels.sum()))] = 7
    keras.utils.set_random_seed(0)
    # Wide enough that LiteRT quantises its weights (it leaves tensors under 1,024 values).
    model = TransformerClassifier(VOCABULARY, num_classes=2, **dict(SMALL, hidden_dim=32))
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(ids[:384], labels[:384], epochs=4, batch_size=32, verbose=0)
    test_ids, test_labels = ids[384:], labels[384:]

    def accuracy(run):
        return np.mean([np.argmax(run(row[None])) == y for row, y in zip(test_ids, test_labels)])

    float32 = accuracy(export(model, tmp_path / "float32.tflite"))
    int8 = accuracy(
        export(model, tmp_path / "int8.tflite", optimizations=[tf.lite.Optimize.DEFAULT])
    )
    assert float32 > 0.9, float32  # the model learned the task
    assert abs(int8 - float32) <= 0.01, (int8, float32)
    size = (tmp_path / "int8.tflite").stat().st_size / (tmp_path / "float32.tflite").stat().st_size
    # Most weights in a quarter of the bytes; the small tensors stay float32.
    assert size < 0.75, size
