import os

import numpy as np
import pytest
import tensorflow as tf

from examples.translation.data import load_multi30k
from keras_transformer.text.subword_tokenizer import SubwordTokenizer

SAMPLES = [
    "Two young, White males are outside near many bushes.",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    'A boy wearing headphones sits on a woman\'s shoulders ("really").',
    "Ein Mann schläft in einem grünen Raum auf einem Sofa.",
    "Größe: 3,5 m – „Übung“ macht den Meister!",
]


def test_vocabulary_size_and_special_ids(tokenizer):
    assert tokenizer.vocabulary_size == 2000
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id) == (
        0,
        1,
        2,
        3,
    )
    pieces = [p.decode() for p in tokenizer.id_to_piece([0, 1, 2, 3]).numpy()]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]


def test_tokenize_emits_no_special_ids(tokenizer, pairs):
    ids = tokenizer.tokenize([t for pair in pairs[:500] for t in pair])
    assert ids.dtype == tf.int32
    values = ids.flat_values.numpy()
    assert values.min() >= 4 and values.max() < tokenizer.vocabulary_size
    assert int(tf.reduce_min(ids.row_lengths())) >= 1


def test_round_trip_is_exact(tokenizer, pairs):
    texts = SAMPLES + [s for pair in pairs[:200] for s in pair]
    assert tokenizer.decode(tokenizer.tokenize(texts)) == texts


def test_unseen_characters_round_trip_through_bytes(tokenizer):
    text = "Ünïcödé → 😀 © ½"
    ids = tokenizer.tokenize(text)
    assert tokenizer.unk_id not in ids.numpy().tolist()
    assert tokenizer.decode(ids) == text


def test_single_string_gives_flat_ids(tokenizer):
    ids = tokenizer.tokenize(SAMPLES[0])
    assert ids.shape.rank == 1
    np.testing.assert_array_equal(ids, tokenizer.tokenize([SAMPLES[0]])[0])
    assert tokenizer.detokenize(ids).numpy() == SAMPLES[0].encode()


def test_detokenize_stops_at_end_and_skips_pad_and_start(tokenizer):
    first = tokenizer.tokenize(SAMPLES[0]).numpy().tolist()
    second = tokenizer.tokenize(SAMPLES[3]).numpy().tolist()
    width = len(first) + len(second) + 4
    junk = second[:3]  # generated after the end id: must not appear
    rows = [
        [2, *first, 3, *junk],
        [2, *second, 3],
        [2, 3, *first],
        [*first[:2], 0, 0, *first[2:]],
    ]
    dense = np.array([row + [0] * (width - len(row)) for row in rows], np.int32)
    expected = [SAMPLES[0], SAMPLES[3], "", SAMPLES[0]]
    assert tokenizer.decode(dense) == expected
    assert tokenizer.decode(tf.ragged.constant(rows)) == expected
    assert tokenizer.decode(tf.constant(dense, tf.int64)) == expected
    assert tokenizer.decode(rows[0]) == SAMPLES[0]


def test_detokenize_rejects_rank_3(tokenizer):
    with pytest.raises(ValueError, match="`ids` must have rank 1"):
        tokenizer.detokenize(np.zeros((1, 2, 3), np.int32))


def test_save_and_load_give_identical_ids(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "tok")
    assert sorted(os.listdir(tmp_path / "tok")) == ["subword.model", "subword.vocab"]
    with open(tmp_path / "tok" / "subword.vocab", encoding="utf-8") as file:
        lines = file.read().split("\n")[:-1]
    assert len(lines) == 2000 and lines[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    restored = SubwordTokenizer.load(str(tmp_path / "tok"))
    assert restored.vocabulary_size == tokenizer.vocabulary_size
    assert restored.model_proto == tokenizer.model_proto
    expected = tokenizer.tokenize(SAMPLES)
    assert restored.tokenize(SAMPLES).to_list() == expected.to_list()


def test_training_is_deterministic(pairs, tokenizer):
    again = SubwordTokenizer.train([s for pair in pairs for s in pair], vocabulary_size=2000)
    assert again.model_proto == tokenizer.model_proto


def test_load_missing_directory_names_the_path(tmp_path):
    with pytest.raises(ValueError, match="subword.model") as info:
        SubwordTokenizer.load(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value)


def test_invalid_model_proto_raises():
    with pytest.raises(ValueError, match="`model_proto`"):
        SubwordTokenizer(b"not a sentencepiece model")
    with pytest.raises(ValueError, match="`model_proto`"):
        SubwordTokenizer("subword.model")


@pytest.mark.parametrize(
    "texts, kwargs, match",
    [
        (["a b c"] * 20, {"vocabulary_size": 100}, "at least 261"),
        (["a b c"] * 20, {"vocabulary_size": 5000}, "Lower `vocabulary_size`"),
        (
            [" ".join(chr(0x4E00 + i) for i in range(j, j + 60)) for j in range(40)],
            {"vocabulary_size": 30, "byte_fallback": False},
            r"30 vs 104\. .*Raise `vocabulary_size`",
        ),
        (["a b c"] * 20, {"model_type": "char"}, "`model_type`"),
        (["", ""], {}, "no non-empty sentence"),
        ("a single string", {}, "not a single string"),
        (["ok", 3], {}, "type int"),
    ],
)
def test_bad_training_input_raises(texts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SubwordTokenizer.train(texts, **kwargs)


def test_works_in_tf_data_and_saved_model(tokenizer, tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices(SAMPLES).map(tokenizer.tokenize)
    assert [ids.numpy().tolist() for ids in dataset] == tokenizer.tokenize(SAMPLES).to_list()

    module = tf.Module()
    module.tokenizer = tokenizer
    module.round_trip = tf.function(
        lambda texts: tokenizer.detokenize(tokenizer.tokenize(texts)),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    output = [t.decode() for t in restored.round_trip(tf.constant(SAMPLES)).numpy()]
    assert output == SAMPLES


def test_full_multi30k_vocabulary_figures():
    train = load_multi30k("train")
    tokenizer = SubwordTokenizer.train([s for pair in train for s in pair])
    assert tokenizer.vocabulary_size == 8000
    val = load_multi30k("val")
    for side in (0, 1):
        texts = [pair[side] for pair in val]
        ids = tokenizer.tokenize(texts)
        # Measured 14.50 (en) and 15.37 (de) subwords per sentence.
        assert 13.0 < float(tf.reduce_mean(tf.cast(ids.row_lengths(), tf.float32))) < 16.5
        assert tokenizer.decode(ids) == texts


def test_tokenizer_survives_clear_session(tokenizer):
    import keras

    dataset = tf.data.Dataset.from_tensor_slices(SAMPLES).map(tokenizer.tokenize)
    expected = tokenizer.tokenize(SAMPLES).to_list()
    keras.backend.clear_session()
    assert tokenizer.tokenize(SAMPLES).to_list() == expected
    assert [ids.numpy().tolist() for ids in dataset] == expected
    assert tokenizer.decode(tokenizer.tokenize(SAMPLES)) == SAMPLES


def test_tokenize_with_dropout_resplits_and_round_trips(tokenizer, pairs):
    texts = SAMPLES + [s for pair in pairs[:300] for s in pair]
    plain = [ids.tolist() for ids in tokenizer.tokenize(texts).numpy()]
    assert tokenizer.tokenize_with_dropout(texts, 0.0) == plain
    sampled = tokenizer.tokenize_with_dropout(texts, 0.1, seed=3)
    assert tokenizer.decode(tf.ragged.constant(sampled)) == texts
    # Skipped merges leave more, shorter pieces, and never special ids.
    assert sum(map(len, sampled)) > 1.2 * sum(map(len, plain))
    assert min(min(ids) for ids in sampled) >= 4
    changed = sum(a != b for a, b in zip(sampled, plain))
    assert changed > len(texts) // 2
    assert tokenizer.tokenize_with_dropout(texts, 0.1, seed=3) == sampled
    assert tokenizer.tokenize_with_dropout(texts, 0.1, seed=4) != sampled


@pytest.mark.parametrize(
    "texts, dropout, match",
    [
        (["a"], 1.0, r"`dropout` must be in \[0, 1\)"),
        (["a"], -0.1, r"`dropout` must be in \[0, 1\)"),
        (["a"], "0.1", "`dropout` must be a float"),
        ("a", 0.1, "wrap a single one"),
    ],
)
def test_tokenize_with_dropout_bad_arguments_raise(tokenizer, texts, dropout, match):
    with pytest.raises(ValueError, match=match):
        tokenizer.tokenize_with_dropout(texts, dropout)
