"""A `.keras` file of the library's layers loads in a new process after `import keras_transformer`.

README.md, docs/index.md and the guides say that such files load with
`keras.saving.load_model` and no `custom_objects`, once `keras_transformer` is imported.
Keras finds a registered class only when the module that registers it has been imported,
so a fresh process that skips the import cannot load the file. Both halves of that
sentence are checked here as a user meets them: the getting-started model is saved, and a
new interpreter loads it, first without the import, then with it.
"""

import json
import os
import textwrap

import keras
import numpy as np

from keras_transformer.layers import TokenAndPositionEmbedding, TransformerEncoder
from tests.fresh_python import run_python

LOADER = textwrap.dedent(
    """
    import json, sys
    import keras
    import numpy as np

    path, batch = sys.argv[1], np.array(json.loads(sys.argv[2]), "int32")
    try:
        keras.saving.load_model(path)
        without = "loaded"
    except Exception as error:  # Keras raises TypeError today; the message is what matters
        without = str(error)
    assert "keras_transformer" not in sys.modules

    import keras_transformer  # noqa: F401  (registers the layers)

    model = keras.saving.load_model(path)
    logits = keras.ops.convert_to_numpy(model(batch)).tolist()
    print(json.dumps({"without_import": without, "logits": logits}))
    """
)


def test_the_getting_started_model_loads_in_a_new_process_after_the_import(tmp_path):
    keras.utils.set_random_seed(0)
    token_ids = keras.Input((None,), dtype="int32")
    x = TokenAndPositionEmbedding(1000, embedding_dim=32)(token_ids)
    x = TransformerEncoder(num_layers=2, num_heads=4, intermediate_dim=64)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(token_ids, keras.layers.Dense(2)(x))
    batch = [[12, 7, 301, 44, 0, 0], [5, 98, 6, 0, 0, 0]]
    expected = keras.ops.convert_to_numpy(model(np.array(batch, "int32")))
    path = tmp_path / "classifier.keras"
    model.save(path)

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND=keras.backend.backend())
    result = run_python(
        "-c",
        LOADER,
        path,
        json.dumps(batch),
        cwd=tmp_path,  # not the repository: nothing imports the package by accident
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "Could not locate class 'TokenAndPositionEmbedding'" in report["without_import"]
    np.testing.assert_allclose(report["logits"], expected, atol=1e-6)
