"""`export_serving`: a string → string SavedModel that loads without keras_transformer."""

import os
import stat

import keras
import numpy as np
import pytest

from examples.translation.translator import translate
from keras_transformer.models import MaskedLM, Seq2SeqTransformer
from keras_transformer.saving import export_serving
from tests.harness import without_gc_collect
from tests.saved_model_loader import load_all_in_fresh_process
from tests.saving.saving_helpers import (
    assert_modes,
    modes,
    tiny_model,
    umask,
)
from tests.saving.serving_probes import assert_refused, probe, run_probes

QUERIES = [
    "A man rides a bike.",
    "Two dogs.",
    "",
    "A man rides a bike in the snow with two dogs.",
]


tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModel export needs TensorFlow"
)


@pytest.mark.backend_agnostic
@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="checks other backends")
def test_other_backends_are_refused(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="needs the TensorFlow backend.*KERAS_BACKEND=tensorflow"):
        export_serving(tiny_model(), tokenizer, tmp_path / "serving")
    assert not (tmp_path / "serving").exists()


def _int8_model():
    model = tiny_model()
    with without_gc_collect():  # Keras collects garbage after each quantised layer
        model.quantize("int8")
    return model


# name: (the model, its export's beam size, the queries served). Each model starts from
# the same seed, as a test of its own would.
SERVED = {
    "beam_1": (tiny_model, 1, QUERIES),
    "beam_3": (tiny_model, 3, QUERIES),
    "mixed_bfloat16": (lambda: tiny_model(dtype="mixed_bfloat16"), 2, QUERIES[:2]),
    "int8": (_int8_model, 2, QUERIES),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizer):
    """`{name: (model, directory, results)}`: SERVED's models exported, and their exports
    called in one fresh process (see tests/saved_model_loader.py)."""
    root = tmp_path_factory.mktemp("served")
    exports = {}
    for name, (make, beam_size, _) in SERVED.items():
        keras.utils.set_random_seed(1234)
        model = make()
        exports[name] = model, export_serving(model, tokenizer, root / name, beam_size=beam_size)
    jobs = [("translate", exports[name][1], SERVED[name][2]) for name in SERVED]
    results = load_all_in_fresh_process(jobs)
    return {name: (*exports[name], result) for name, result in zip(SERVED, results)}


@tensorflow_only
@pytest.mark.parametrize("beam_size", [1, 3])
def test_served_translations_equal_translate(served, tokenizer, beam_size):
    model, directory, served = served[f"beam_{beam_size}"]
    assert (directory / "saved_model.pb").is_file()
    texts = [query for query in QUERIES if query]
    by_text = dict(zip(texts, translate(model, tokenizer, texts, beam_size=beam_size)))
    expected = [by_text.get(query, "") for query in QUERIES]  # "" translates to "".
    assert served["batch"] == expected
    # A sentence's translation does not depend on the rest of the batch.
    assert served["one_by_one"] == expected
    assert served["empty"] == [0]
    assert not served["imported_keras_transformer"]
    # A random model's output is long and varied, so equality above is not vacuous.
    assert len(set(by_text.values())) > 1 and all(len(t) > 0 for t in by_text.values())


@tensorflow_only
def test_failed_export_keeps_the_previous_one(tmp_path, tokenizer, monkeypatch):
    model = tiny_model()
    directory = export_serving(model, tokenizer, tmp_path / "serving", beam_size=1)
    before = sorted(p.relative_to(directory) for p in directory.rglob("*"))
    pb = (directory / "saved_model.pb").read_bytes()

    def broken_write_out(self, filepath, *args, **kwargs):
        with open(os.path.join(filepath, "saved_model.pb"), "wb") as file:
            file.write(b"half written")
        raise OSError("disk full")

    # `ExportArchive()` returns an instance of a backend-specific subclass.
    archive_class = type(keras.export.ExportArchive())
    monkeypatch.setattr(archive_class, "write_out", broken_write_out)
    with pytest.raises(OSError, match="disk full"):
        export_serving(tiny_model(), tokenizer, directory, beam_size=1)
    assert sorted(p.relative_to(directory) for p in directory.rglob("*")) == before
    assert (directory / "saved_model.pb").read_bytes() == pb
    assert [p.name for p in tmp_path.iterdir()] == ["serving"]  # no staging leftovers
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_serving(model, tokenizer, directory, overwrite=False)


@tensorflow_only
@pytest.mark.parametrize(
    "change, match",
    [
        ({"beam_size": 0}, "`beam_size` must be a positive integer"),
        ({"max_source_length": 1}, "`max_source_length` must be at least 2"),
        ({"model": "masked_lm"}, "`model` must be a `Seq2SeqTransformer`"),
        ({"model": "other_vocabulary"}, "The tokenizer has 80 ids but the model predicts 90"),
        ({"tokenizer": "not a tokenizer"}, "`tokenizer` must be a `SubwordTokenizer`"),
    ],
)
def test_bad_arguments(tmp_path, tokenizer, change, match):
    models = {
        "masked_lm": MaskedLM(80, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32),
        "other_vocabulary": Seq2SeqTransformer(
            90, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
            intermediate_dim=32,
        ),
    }  # fmt: skip
    arguments = {"model": tiny_model(), "tokenizer": tokenizer, "directory": tmp_path / "s"}
    arguments.update(change)
    if isinstance(arguments["model"], str):
        arguments["model"] = models[arguments["model"]]
    with pytest.raises(ValueError, match=match):
        export_serving(**arguments)
    assert not (tmp_path / "s").exists()


@tensorflow_only
def test_mixed_precision_model_is_served_identically(served, tokenizer):
    model, _, served = served["mixed_bfloat16"]
    assert served["batch"] == translate(model, tokenizer, QUERIES[:2], beam_size=2)


@tensorflow_only
@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method")
def test_int8_model_is_served_identically(served, tokenizer):
    import tensorflow as tf

    model, directory, served = served["int8"]
    # The SavedModel holds the integer kernels and their scales, not float copies.
    dtypes = tf.train.load_checkpoint(str(directory / "variables" / "variables"))
    dtypes = dtypes.get_variable_to_dtype_map().values()
    assert sum(dtype == tf.int8 for dtype in dtypes) >= 10
    texts = [query for query in QUERIES if query]
    by_text = dict(zip(texts, translate(model, tokenizer, texts, beam_size=2)))
    assert served["batch"] == [by_text.get(query, "") for query in QUERIES]
    assert served["one_by_one"] == served["batch"]
    assert len(set(by_text.values())) > 1 and all(by_text.values())


@tensorflow_only
def test_modes_follow_a_restrictive_umask(tmp_path, tokenizer):
    # TensorFlow makes `variables/` 0755 whatever the umask: narrowed here to 0700. Both
    # umasks of UMASK_CASES go through the same code in save_pretrained's tests
    # (test_pretrained.py); widening under a group umask, below.
    with umask(0o077):
        directory = export_serving(tiny_model(), tokenizer, tmp_path / "serving", beam_size=1)
    found = modes(directory)
    assert {"variables", "variables/variables.index", "assets", "saved_model.pb"} <= set(found)
    assert_modes(directory, 0o700, 0o600)


@tensorflow_only
def test_set_group_id_folder_keeps_its_group_bit(tmp_path, tokenizer):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)  # A team folder: new entries take its group.
    with umask(0o002):
        directory = export_serving(tiny_model(), tokenizer, shared / "serving", beam_size=1)
    # TensorFlow makes `variables/` 0755: widened to the umask's 0775, group bit kept.
    for path in (directory, directory / "variables"):
        mode = path.stat().st_mode
        assert mode & stat.S_ISGID and stat.S_IMODE(mode) & 0o777 == 0o775, oct(mode)
    assert stat.S_IMODE((directory / "saved_model.pb").stat().st_mode) == 0o664


EDGE_BEAM_SIZE, EDGE_LENGTH_PENALTY, EDGE_MAX_SOURCE_LENGTH = 3, 2.0, 8
# Whitespace as Python's `str.strip` sees it, ASCII or not.
BLANKS = ["", " ", "   ", "\t\n\x0b\x0c\r", "\x1c\x85", "\u00a0\u2028\u3000"]
LONG = "A man rides a bike in the snow with two dogs and another man rides a bike."
TEN_THOUSAND_WORDS = " ".join(["man dogs snow bike"] * 2500)


def edge_model():
    """A random model whose beams end at various lengths, so the length penalty matters."""
    keras.utils.set_random_seed(3)
    model = tiny_model()
    model.generate(np.array([[5, 3]], "int32"), max_length=2, start_id=2, end_id=3)
    embedding = next(w for w in model.weights if "target_embedding" in w.path)
    rows = embedding.numpy()
    # The end id's row, scaled: measured, seed 3's beams then end at various lengths
    # (with seeds 0-2 none ends before its budget, and the penalty changes nothing).
    rows[3] *= 3.0
    embedding.assign(rows)
    return model


def generate_texts(model, tokenizer, rows, length_penalty=EDGE_LENGTH_PENALTY):
    """What `model.generate` translates rows of source ids (end id included) to."""
    width = max(len(row) for row in rows)
    ids = np.array([list(row) + [0] * (width - len(row)) for row in rows], "int32")
    generated = model.generate(
        ids,
        method="beam",
        beam_size=EDGE_BEAM_SIZE,
        length_penalty=length_penalty,
        start_id=tokenizer.start_id,
        end_id=tokenizer.end_id,
        jit_compile=False,  # Compiling for each of these shapes would cost more than it saves.
    )
    return tokenizer.decode(np.asarray(generated))


@pytest.fixture(scope="module")
def edge(tmp_path_factory, tokenizer):
    """The edge inputs' results from an export, and what `model.generate` gives for them."""
    model = edge_model()
    directory = export_serving(
        model,
        tokenizer,
        tmp_path_factory.mktemp("edge") / "serving",
        beam_size=EDGE_BEAM_SIZE,
        length_penalty=EDGE_LENGTH_PENALTY,
        max_source_length=EDGE_MAX_SOURCE_LENGTH,
    )
    texts = [query for query in QUERIES if query]
    served = run_probes(
        directory,
        [
            probe("empty_serve", [], "string"),
            probe("empty_signature", [], "string", via="signature"),
            probe("blank", BLANKS + [texts[0]], via="signature"),
            probe("int_serve", [1, 2], "int32"),
            probe("int_signature", [1, 2], "int32", via="signature"),
            probe("matrix_serve", [texts[:2]]),
            probe("matrix_signature", [texts[:2]], via="signature"),
            probe("scalar_signature", texts[0], via="signature"),
            probe("ten_thousand_words", [TEN_THOUSAND_WORDS], via="signature"),
            probe("long", [LONG]),
            probe("queries", texts, via="signature"),
        ],
    )

    def cut(text):
        # The first pieces by hand, independent of `tokenize_source`.
        pieces = tokenizer.tokenize(text).numpy().tolist()
        return pieces[: EDGE_MAX_SOURCE_LENGTH - 1] + [tokenizer.end_id]

    uncut = tokenizer.tokenize(LONG).numpy().tolist() + [tokenizer.end_id]
    return {
        "served": served,
        "texts": texts,
        "long_pieces": len(tokenizer.tokenize(LONG).numpy()),
        "long_cut": generate_texts(model, tokenizer, [cut(LONG)])[0],
        "long_uncut": generate_texts(model, tokenizer, [uncut])[0],
        "ten_thousand_cut": generate_texts(model, tokenizer, [cut(TEN_THOUSAND_WORDS)])[0],
        "queries": generate_texts(model, tokenizer, [cut(text) for text in texts]),
        "queries_other_penalty": generate_texts(
            model, tokenizer, [cut(text) for text in texts], length_penalty=0.0
        ),
    }


@tensorflow_only
def test_edge_empty_batch(edge):
    for name in ("empty_serve", "empty_signature"):
        assert edge["served"][name] == {
            "translations": {"shape": [0], "dtype": "string", "values": []}
        }


@tensorflow_only
def test_edge_blank_sentences_translate_to_empty_strings(edge):
    blank = edge["served"]["blank"]["translations"]
    assert blank["shape"] == [len(BLANKS) + 1]
    assert blank["values"] == [""] * len(BLANKS) + [edge["queries"][0]]
    assert len(edge["queries"][0]) > 0  # The model says something for a real sentence.


@tensorflow_only
def test_edge_non_string_input_is_refused_at_the_call(edge):
    served = edge["served"]
    assert_refused(
        served["int_serve"],
        "TypeError",
        "Can not cast TensorSpec(shape=(2,), dtype=tf.int32, name='sentences') to "
        "TensorSpec(shape=(None,), dtype=tf.string, name='sentences')",
    )
    assert_refused(
        served["int_signature"],
        "InvalidArgumentError",
        "input #0(zero-based) was expected to be a string tensor but is a int32 tensor",
    )


@tensorflow_only
def test_edge_two_dimensional_input_is_refused(edge):
    served = edge["served"]
    assert_refused(
        served["matrix_serve"], "TypeError", "Can not cast TensorSpec(shape=(1, 2), dtype=tf.string"
    )
    # A signature call does not bind shapes: the graph's own check refuses it.
    for name, shape in [("matrix_signature", "[1,2]"), ("scalar_signature", "[]")]:
        assert_refused(
            served[name],
            "InvalidArgumentError",
            f"Shape of tensor sentences {shape} is not compatible",
            "sentences_must_be_1d",
        )


@tensorflow_only
def test_edge_ten_thousand_words_are_cut(edge):
    served = edge["served"]["ten_thousand_words"]["translations"]
    assert served["shape"] == [1] and served["dtype"] == "string"
    assert served["values"] == [edge["ten_thousand_cut"]]
    assert len(served["values"][0]) > 0


@tensorflow_only
def test_edge_max_source_length_cuts_the_source(edge):
    assert edge["long_pieces"] > 2 * EDGE_MAX_SOURCE_LENGTH
    served = edge["served"]["long"]["translations"]["values"]
    assert served == [edge["long_cut"]]
    assert edge["long_cut"] != edge["long_uncut"]  # Cutting changed the translation.


@tensorflow_only
def test_edge_length_penalty_is_the_exported_one(edge):
    served = edge["served"]["queries"]["translations"]["values"]
    assert served == edge["queries"]
    # The penalty decides between beams here: 0.0 would give other translations.
    assert edge["queries_other_penalty"] != edge["queries"]
