"""`encode` takes token ids as NumPy arrays, lists of rows or backend tensors alike.

A model with token types (BERT's, as `load_huggingface` builds it) makes the missing
`token_type_ids` itself; they must combine with ids in any of these forms, and type ids
given as an array must combine with ids given as a tensor.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.models import ElectraPretrainer
from tests import tiny_models

pytestmark = pytest.mark.backend_agnostic

IDS = np.array([[5, 6, 7, 0], [8, 9, 0, 0]])
TYPES = np.array([[0, 0, 1, 0], [0, 1, 0, 0]])
FORMS = {
    "numpy": lambda x: x,
    "int64 numpy": lambda x: x.astype("int64"),
    "list": lambda x: x.tolist(),
    "tensor": lambda x: ops.convert_to_tensor(x, "int32"),
}


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def bert_like(model_builder, *args):
    return model_builder(
        *args, num_token_types=2, position="learned", max_sequence_length=16, dropout=0.0
    )


@pytest.fixture(scope="module")
def models():
    keras.utils.set_random_seed(0)
    return {
        "masked_lm": bert_like(tiny_models.masked_lm, 20),
        "classifier": bert_like(tiny_models.classifier, 20, 3),
    }


@pytest.mark.parametrize("name", ["masked_lm", "classifier"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_encode_without_token_types_takes_every_form(models, name, form):
    model = models[name]
    expected = numpy(
        model.encoder(
            {
                "token_ids": ops.convert_to_tensor(IDS, "int32"),
                "token_type_ids": ops.zeros(IDS.shape, "int32"),
            }
        )
    )
    ids = FORMS[form](IDS)
    np.testing.assert_allclose(numpy(model.encode(ids)), expected, atol=1e-6)
    np.testing.assert_allclose(numpy(model.encode({"token_ids": ids})), expected, atol=1e-6)


@pytest.mark.parametrize("ids_form", sorted(FORMS))
@pytest.mark.parametrize("types_form", sorted(FORMS))
def test_encode_with_token_types_takes_every_combination(models, ids_form, types_form):
    model = models["masked_lm"]
    expected = numpy(
        model.encoder(
            {
                "token_ids": ops.convert_to_tensor(IDS, "int32"),
                "token_type_ids": ops.convert_to_tensor(TYPES, "int32"),
            }
        )
    )
    inputs = {"token_ids": FORMS[ids_form](IDS), "token_type_ids": FORMS[types_form](TYPES)}
    np.testing.assert_allclose(numpy(model.encode(inputs)), expected, atol=1e-6)


def test_the_task_models_take_arrays_with_their_token_types(models):
    """`call` goes through `encode`: arrays in, the same numbers as tensors in."""
    for model in models.values():
        tensors = model(ops.convert_to_tensor(IDS, "int32"))
        np.testing.assert_allclose(numpy(model(IDS)), numpy(tensors), atol=1e-6)
        mixed = {"token_ids": ops.convert_to_tensor(IDS, "int32"), "token_type_ids": TYPES}
        typed = {"token_ids": IDS, "token_type_ids": TYPES}
        np.testing.assert_allclose(numpy(model(mixed)), numpy(model(typed)), atol=1e-6)


def test_a_model_without_token_types_refuses_them_in_any_form():
    model = tiny_models.masked_lm(20)
    np.testing.assert_allclose(
        numpy(model.encode(IDS.tolist())),
        numpy(model.encode(ops.convert_to_tensor(IDS, "int32"))),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="no token types"):
        model.encode({"token_ids": IDS, "token_type_ids": TYPES.tolist()})


def test_the_other_encoders_take_arrays():
    """The other models' encoding paths: arrays or tensors, the same numbers."""
    tensor = ops.convert_to_tensor(IDS, "int32")
    seq2seq = tiny_models.seq2seq(20, dropout=0.0)
    np.testing.assert_allclose(
        numpy(seq2seq.encode(IDS)[0]), numpy(seq2seq.encode(tensor)[0]), atol=1e-6
    )
    electra = ElectraPretrainer(
        20, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0
    )
    np.testing.assert_allclose(
        numpy(electra.discriminate(IDS)), numpy(electra.discriminate(tensor)), atol=1e-6
    )
