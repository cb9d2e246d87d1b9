"""WordPieceGraphTokenizer and BytePairGraphTokenizer give the Python tokenizers' ids in TF ops.

The Python tokenizers give transformers' ids (tests/text/test_huggingface_tokenizers.py, whose
folders and sentences these tests reuse); their graph versions, which a SavedModel holds, must
give the same ids on the same texts, eagerly, in a `tf.function` and in `tf.data`, plus texts
aimed at each step (accents, CJK, punctuation, spaces, long words, GPT-2's lookahead, merges
that overlap) and random code points. The one documented difference, bytes that are not
UTF-8, is checked as stated.
"""

import json
import random
import shutil
import unicodedata

import pytest
import tensorflow as tf

import tests.text.test_huggingface_tokenizers as huggingface_tests
from keras_transformer.text import BytePairTokenizer, WordPieceTokenizer
from keras_transformer.text.byte_pair_graph import BytePairGraphTokenizer
from keras_transformer.text.byte_pair_tokenizer import bytes_to_unicode
from keras_transformer.text.wordpiece_graph import WordPieceGraphTokenizer

# The Python tokenizers' test folders (a BERT vocab.txt in three option sets, a GPT-2
# byte-level BPE trained on mixed sentences), made once per module.
folders = huggingface_tests.folders
SENTENCES = huggingface_tests.SENTENCES

EDGES = [
    "",
    " ",
    "   ",
    "\t\n\r \u00a0\u3000\u2028",
    "Café naïve ÅNGSTRÖM Ωmega e\u0301 a\u0323\u0301 İstanbul ΟΔΟΣ σοφός ﬁne x² ½",
    "中文字日本語 and 東京タワー mixed日本 한국어 \uf900",
    "x!!!?y... (z) [a] {b} «c» —d– ¿e? ;f: `g` ~h ^i $j #k @l",
    "control\x00chars\x07here\ufffd\u200b\u00ad\x85\x1c end",
    "a" * 100,
    "a" * 101,
    "Supercalifragilisticexpialidocious" * 3,
    "x [MASK] y [cls] [SEP]z [CLS][UNK] [PAD]",
    "a <|endoftext|> b<|endoftext|><|endoftext|>",
    "emoji 😀😀😀 🙂👍 end",
]
# GPT-2's `\s+(?!\S)`: a whitespace run leaves its last character to the next piece.
LOOKAHEAD = [
    "a  b",
    "a  's",
    "a  'sam",
    "x\n\n y",
    "x \t y",
    "x\t\ty",
    "trailing   ",
    " \n",
    "  leading",
    "'s'S 'RE''ll 'd've",
    "1,000.5 ٣٤ ²",
    "a\u00a0\u00a0b",
]
# Bytes that are not UTF-8: read as `decode("utf-8", errors="replace")` reads them.
INVALID = [b"ab\xffcd", b"\xe2\x82 x", b"x\xf0\x9f\x98", b"\xc0\xaf\xed\xa0\x80", b"a\x80\x80b"]


def random_code_point_texts(count, seed):
    """Texts of random code points: ASCII, 2-, 3- and 4-byte UTF-8, every category."""
    rng = random.Random(seed)

    def character():
        draw = rng.random()
        if draw < 0.3:
            return chr(rng.randrange(0x20, 0x7F))
        if draw < 0.4:
            return rng.choice(" \t\n\u00a0\u3000'")
        if draw < 0.6:
            return chr(rng.randrange(0x80, 0x800))
        if draw < 0.85:
            code_point = rng.randrange(0x800, 0x10000)
            return "x" if 0xD800 <= code_point < 0xE000 else chr(code_point)
        return chr(rng.randrange(0x10000, 0x110000))

    return ["".join(character() for _ in range(rng.randrange(0, 30))) for _ in range(count)]


RANDOM = random_code_point_texts(400, seed=0)


def assert_same_ids(graph, python, texts):
    ours = graph.tokenize(texts).to_list()
    expected = python.tokenize(texts).to_list()
    different = [(text, a, b) for text, a, b in zip(texts, ours, expected) if a != b]
    assert not different, different[:3]
    return expected


# ---------------------------------------------------------------------------------------
# WordPiece


@pytest.mark.parametrize("folder", ["bert", "bert_cased", "bert_options"])
def test_wordpiece_graph_ids_equal_the_python_tokenizer(folders, folder):
    python = WordPieceTokenizer.from_huggingface(folders[folder])
    graph = WordPieceGraphTokenizer(python)
    expected = assert_same_ids(graph, python, SENTENCES + EDGES)
    assert any(python.unk_id in row for row in expected)  # the [UNK] path is exercised
    assert (graph.pad_id, graph.unk_id, graph.start_id, graph.end_id) == (
        python.pad_id,
        python.unk_id,
        python.start_id,
        python.end_id,
    )
    assert graph.vocabulary_size == python.vocabulary_size


def test_wordpiece_graph_edges(folders):
    python = WordPieceTokenizer.from_huggingface(folders["bert"])
    graph = WordPieceGraphTokenizer(python)
    ids = graph.tokenize(EDGES).to_list()
    assert ids[0] == ids[1] == ids[2] == ids[3] == []  # empty and whitespace-only
    # 100 characters are spelled, 101 are one [UNK] (BERT's limit counts characters).
    assert ids[8] == [python.vocabulary["a"]] + [python.vocabulary["##a"]] * 99
    assert ids[9] == [python.unk_id]
    # Accents stripped and lower-cased ("É" -> "e"), each CJK ideograph a word.
    assert graph.tokenize("É").numpy().tolist() == graph.tokenize("e").numpy().tolist()
    assert graph.tokenize("中文").numpy().tolist() == [
        python.vocabulary["中"],
        python.vocabulary["文"],
    ]
    # Punctuation is a word of its own; special tokens written in the text stay whole.
    assert graph.tokenize("a!b").numpy().tolist() == [python.vocabulary[t] for t in "a!b"]
    assert graph.tokenize("[MASK]x").numpy().tolist()[0] == python.mask_id


def test_wordpiece_graph_lowercases_character_by_character():
    # Python's `str.lower`, one character at a time: "İ" becomes "i" + U+0307 (kept
    # without accent stripping), and a final "Σ" is "σ", not the final form "ς".
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "i", "##\u0307", "##stanbul", "οδοσ", "οδος"]
    python = WordPieceTokenizer(vocabulary, strip_accents=False)
    graph = WordPieceGraphTokenizer(python)
    expected = assert_same_ids(graph, python, ["İstanbul", "ΟΔΟΣ"])
    assert expected == [[4, 5, 6], [7]]


def test_wordpiece_graph_random_code_points():
    texts = RANDOM + EDGES
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    characters = sorted({c for text in texts for c in text.lower()})
    vocabulary += characters[::2] + ["##" + c for c in characters[1::2]]
    vocabulary += sorted({text[i : i + 2].lower() for text in texts for i in range(len(text))})
    for options in ({}, {"lowercase": False}, {"strip_accents": False}):
        python = WordPieceTokenizer(list(dict.fromkeys(vocabulary)), **options)
        assert_same_ids(WordPieceGraphTokenizer(python), python, texts)


def test_icu_nfd_equals_unicodedata_on_every_kept_code_point():
    # The graph strips accents with ICU's NFD (tensorflow-text), the Python tokenizer
    # with `unicodedata`'s: they must agree on every character the clean-up keeps, and
    # order combining marks alike (a mark before one of a lower class moves after it).
    import tensorflow_text as tf_text

    kept = [
        chr(c)
        for c in range(0x110000)
        if not 0xD800 <= c < 0xE000 and not unicodedata.category(chr(c)).startswith("C")
    ]
    marks = [c for c in kept if unicodedata.combining(c)]
    texts = kept + [
        "a" + m + ("\u0334" if unicodedata.combining(m) > 1 else "\u0301") for m in marks
    ]
    ours = tf_text.normalize_utf8(tf.constant(texts), "NFD").numpy()
    different = [t for t, o in zip(texts, ours) if unicodedata.normalize("NFD", t).encode() != o]
    assert not different, [hex(ord(t[-1])) for t in different[:5]]
    assert len(marks) > 800


# ---------------------------------------------------------------------------------------
# Byte-level BPE


@pytest.fixture(scope="module")
def gpt2_tokenizers(folders):
    prefixed = folders["root"] / "gpt2_graph_prefix"
    shutil.copytree(folders["gpt2"], prefixed, dirs_exist_ok=True)
    (prefixed / "tokenizer_config.json").write_text(json.dumps({"add_prefix_space": True}))
    return {
        prefix: BytePairTokenizer.from_huggingface(folder)
        for prefix, folder in ((False, folders["gpt2"]), (True, prefixed))
    }


@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_byte_pair_graph_ids_and_text_equal_the_python_tokenizer(gpt2_tokenizers, add_prefix_space):
    python = gpt2_tokenizers[add_prefix_space]
    assert python.add_prefix_space == add_prefix_space
    graph = BytePairGraphTokenizer(python)
    texts = SENTENCES + EDGES + LOOKAHEAD + RANDOM
    expected = assert_same_ids(graph, python, texts)
    assert graph.detokenize(expected).numpy().tolist() == [
        text.encode("utf-8") for text in python.decode(expected)
    ]
    if not add_prefix_space:
        assert python.decode(expected[: len(SENTENCES)]) == SENTENCES  # nothing lost
    assert (graph.pad_id, graph.unk_id, graph.start_id, graph.end_id) == (
        python.pad_id,
        python.unk_id,
        python.start_id,
        python.end_id,
    )
    assert graph.vocabulary_size == python.vocabulary_size


def test_byte_pair_graph_pre_tokenisation_is_gpt2s_regex(gpt2_tokenizers):
    # The pieces before merging: RE2 on the one-byte spelling against the `regex`
    # package's pattern with its lookahead, text by text.
    python = gpt2_tokenizers[False]
    graph = BytePairGraphTokenizer(python)
    texts = LOOKAHEAD + EDGES + RANDOM + SENTENCES
    ours = graph._pieces(tf.constant(texts)).to_list()
    expected = [[piece.encode("utf-8") for piece in python._pretokenize(t)] for t in texts]
    different = [(t, a, b) for t, a, b in zip(texts, ours, expected) if a != b]
    assert not different, different[:3]
    # "a", " ", " '", "sam": the run leaves its last space to " '" (the contraction
    # "'s" only matches where a piece starts); "\n\n" then " y" likewise, and a tab
    # before a letter is a piece of its own.
    assert expected[2] == [b"a", b" ", b" '", b"sam"]
    assert expected[3] == [b"x", b"\n\n", b" y"]
    assert expected[5] == [b"x", b"\t", b"\t", b"y"]


def test_byte_pair_graph_detokenize_edges(gpt2_tokenizers):
    python = gpt2_tokenizers[False]
    graph = BytePairGraphTokenizer(python)
    end = python.end_id
    byte_id = {byte: python.vocabulary[c] for byte, c in bytes_to_unicode().items()}
    rows = [
        [5, 6, end, 7],  # stops at the end id
        [python.vocabulary_size + 3, -1, 5],  # ids no token has decode to nothing
        [byte_id[0xC3], byte_id[0x41]],  # bytes that are not UTF-8: "\ufffdA"
        [byte_id[0xE2]] * 3 + [byte_id[0xF0], byte_id[0x9F]],
        [],
    ]
    expected = [python.decode(row) for row in rows]
    assert [t.decode("utf-8") for t in graph.detokenize(tf.ragged.constant(rows)).numpy()] == (
        expected
    )
    assert expected[2] == "\ufffdA" and expected[3].count("\ufffd") == 4
    assert graph.detokenize([5, 6]).shape.rank == 0
    assert graph.detokenize(tf.zeros([0, 3], tf.int32)).shape.as_list() == [0]


def test_byte_pair_graph_merges_overlapping_pairs_left_to_right():
    alphabet = sorted(BytePairTokenizer.byte_alphabet())
    tokens = alphabet + ["aa", "aaa", "ab", "<|endoftext|>"]
    vocabulary = {token: i for i, token in enumerate(tokens)}
    # "a a" first: "aaaaa" -> "aa" "aa" "a" (not "a" "aa" "aa"), then "aa a" -> "aa" "aaa".
    python = BytePairTokenizer(vocabulary, ["a a", "aa a", "a b"])
    graph = BytePairGraphTokenizer(python)
    texts = ["aaaaa", "aaaa", "aaab", "baaa ab", "a"]
    expected = assert_same_ids(graph, python, texts)
    assert expected[0] == [vocabulary["aa"], vocabulary["aaa"]]
    # Every occurrence of the best pair merges in the same step: with "aa a" ranked before
    # "a a", "aaaa" is "aa" "aa" (one "a a" at a time would make "aaa" "a").
    python = BytePairTokenizer(vocabulary, ["aa a", "a a"])
    expected = assert_same_ids(BytePairGraphTokenizer(python), python, ["aaaa", "aaaaaaa"])
    assert expected[0] == [vocabulary["aa"], vocabulary["aa"]]
    # A byte symbol missing from the vocabulary is dropped, as in the Python tokenizer.
    del vocabulary["x"]
    vocabulary = {token: i for i, token in enumerate(vocabulary)}
    python = BytePairTokenizer(vocabulary, ["a a", "aa a", "a b"])
    assert assert_same_ids(BytePairGraphTokenizer(python), python, ["axa", "x"])[1] == []
    # No merges at all: every byte is a token.
    python = BytePairTokenizer(vocabulary, [])
    assert len(assert_same_ids(BytePairGraphTokenizer(python), python, ["aé b"])[0]) == 5


# ---------------------------------------------------------------------------------------
# Both


def graph_and_python(folders, name):
    python = (
        WordPieceTokenizer.from_huggingface(folders["bert"])
        if name == "wordpiece"
        else BytePairTokenizer.from_huggingface(folders["gpt2"])
    )
    graph = (WordPieceGraphTokenizer if name == "wordpiece" else BytePairGraphTokenizer)(python)
    return graph, python


@pytest.mark.parametrize("name", ["wordpiece", "byte_pair"])
def test_graph_tokenizers_read_invalid_utf8_as_replaced(folders, name):
    graph, python = graph_and_python(folders, name)
    ours = graph.tokenize(tf.constant(INVALID)).to_list()
    assert ours == python.tokenize([t.decode("utf-8", "replace") for t in INVALID]).to_list()
    with pytest.raises(UnicodeDecodeError):  # the Python tokenizer refuses such bytes
        python.tokenize(tf.constant(INVALID))


@pytest.mark.parametrize("name", ["wordpiece", "byte_pair"])
def test_graph_tokenizers_run_in_tf_data(folders, name):
    graph, python = graph_and_python(folders, name)
    texts = SENTENCES[:24]
    expected = python.tokenize(texts).to_list()
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(5).map(graph.tokenize)
    assert [row for batch in dataset for row in batch.to_list()] == expected
    single = graph.tokenize(texts[3])
    assert isinstance(single, tf.Tensor) and single.dtype == tf.int32
    assert single.numpy().tolist() == expected[3]
    with pytest.raises(ValueError, match="rank 0 or 1"):
        graph.tokenize([["a"]])


def test_graph_tokenizers_refuse_another_tokenizer(folders):
    with pytest.raises(ValueError, match="must be a `WordPieceTokenizer`. Received: BytePair"):
        WordPieceGraphTokenizer(BytePairTokenizer.from_huggingface(folders["gpt2"]))
    with pytest.raises(ValueError, match="must be a `BytePairTokenizer`. Received: WordPiece"):
        BytePairGraphTokenizer(WordPieceTokenizer.from_huggingface(folders["bert"]))
