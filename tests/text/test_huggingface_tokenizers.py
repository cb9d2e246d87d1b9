"""MarianTokenizer, WordPieceTokenizer and BytePairTokenizer give transformers' ids.

Offline: each test module run writes its own tokenizer folders (SentencePiece models
trained here, a hand-made BERT vocab.txt, a byte-level BPE trained with `tokenizers`)
and checks our ids and decoded text against transformers' tokenizers loaded from the
same folders.
"""

import io
import json
import os
import random
import shutil
import string

import pytest
import tensorflow as tf

from keras_transformer.saving.pretrained import TOKENIZER_CLASSES
from keras_transformer.text import (
    BytePairTokenizer,
    MarianTokenizer,
    SubwordTokenizer,
    WordPieceTokenizer,
)

# transformers' MarianTokenizer asks for sacremoses, which it does not use (5.25).
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

transformers = pytest.importorskip("transformers")
sentencepiece = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

ENGLISH = (
    "A man in a blue shirt is playing the guitar. Two dogs are running through the snow, "
    "and a little girl's red balloon flies away! Don't they've we're I'm it'll he'd "
    "The quick brown fox jumps over the lazy dog? People walk along the street at night."
).split()
GERMAN = (
    "Ein Mann im blauen Hemd spielt Gitarre. Zwei Hunde laufen durch den Schnee, und der "
    "rote Ballon eines kleinen Mädchens fliegt davon! Größe über Äpfel, Straße; Café "
    "Bücher Übermäßig Fußgänger gehen nachts die Straße entlang. Él está aquí: ¿sí? déjà vu"
).split()
OTHER = [
    "中文",
    "日本語",
    "東京タワー",
    "한국어",
    "😀",
    "🙂👍",
    "½",
    "€100",
    "$5.99",
    "3.14159",
    "2024-01-31",
    "#tag",
    "@user",
    "^_^",
    "`code`",
    "~tilde",
    "(paren)",
    "[bracket]",
    "{brace}",
    "«quoted»",
    "—dash–",
    "…",
    "ΟΔΟΣ",
    "σοφός",
    "İstanbul",
    "naïve",
    "e\u0301",
    "Ωmega",
    "x²",
    "ﬁne",
]
SEPARATORS = [" ", " ", " ", " ", "  ", "\t", "\n", " \n ", "\u00a0", "\u3000", "\r\n"]
EDGE_CASES = [
    "",
    " ",
    "   leading and trailing   ",
    "\t\ttabs\tinside\t",
    "new\nlines\n\n",
    "control\x00chars\x07here\ufffd\u200b",
    "a" * 120,
    "Supercalifragilisticexpialidocious",
    "UPPER lower MiXeD",
    "punctuation!!! ... ??? ,,, ;;; ::",
    "don't do not it's you're we've I'm",
    "1234567890 0.5 1,000,000",
    "中文字 and English mixed日本",
    "emoji 😀😀😀 end",
    "tab\tand\u2028line separator",
]


def make_sentences(count=300, seed=0):
    """`count` sentences mixing English, German, CJK, emoji, numbers and odd whitespace."""
    rng = random.Random(seed)
    words = ENGLISH + GERMAN + OTHER
    sentences = list(EDGE_CASES)
    while len(sentences) < count:
        pieces = []
        for _ in range(rng.randint(1, 14)):
            pieces += [rng.choice(words), rng.choice(SEPARATORS)]
        sentences.append("".join(pieces[:-1]))
    return sentences


SENTENCES = make_sentences()


# ---------------------------------------------------------------------------------------
# Tokenizer folders, made once per module.


def train_sentencepiece(texts, vocabulary_size, model_type):
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocabulary_size,
        model_type=model_type,
        character_coverage=0.98,  # some characters stay unknown: the <unk> path is tested
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    return model.getvalue()


def write_marian_folder(directory, source, target, separate=False):
    """An opus-mt-like folder: `</s>`=0, `<unk>`=1, a language code, pad last."""
    os.makedirs(directory, exist_ok=True)
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)

    def pieces(model_proto):
        processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)
        found = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        return [piece for piece in found if piece not in ("<unk>", "<s>", "</s>")]

    def vocabulary(*piece_lists):
        vocab = {"</s>": 0, "<unk>": 1, ">>de<<": 2, ">>fr<<": 3}
        for piece_list in piece_lists:
            for number, piece in enumerate(piece_list):
                # Leave out a few pieces: they map to <unk>, as in transformers.
                if number % 37 != 5:
                    vocab.setdefault(piece, len(vocab))
        vocab["<pad>"] = len(vocab)
        return vocab

    config = {"source_lang": "en", "target_lang": "de", "separate_vocabs": separate}
    if separate:
        (directory / "vocab.json").write_text(json.dumps(vocabulary(pieces(source))))
        (directory / "target_vocab.json").write_text(json.dumps(vocabulary(pieces(target))))
    else:
        vocab = vocabulary(pieces(source), pieces(target))
        (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("huggingface")
    corpus = make_sentences(400, seed=1)
    source = train_sentencepiece(corpus, 400, "unigram")
    target = train_sentencepiece(corpus[::2], 300, "bpe")
    marian = write_marian_folder(root / "marian", source, target)
    marian_separate = write_marian_folder(root / "marian_separate", source, target, True)

    bert = root / "bert"
    bert.mkdir()
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(5)] + ["[UNK]", "[CLS]", "[SEP]"]
    characters = list(string.ascii_letters + string.digits + string.punctuation)
    characters += list("äöüßéèàñçÄÖÜÉσςοδφ中文字日本語東京²½€«»—…")
    words = sorted({w.strip(string.punctuation) for w in ENGLISH + GERMAN} - {""})
    words += sorted({w.lower() for w in words} - set(words))
    vocab = specials + ["[MASK]"] + characters
    vocab += ["##" + c for c in characters[:62] + characters[94:106]]
    vocab += words + ["##ing", "##s", "##ed", "##er", "##en"]
    vocab = list(dict.fromkeys(vocab))  # one line per token, as in real vocab.txt files
    (bert / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    bert_cased = root / "bert_cased"
    shutil.copytree(bert, bert_cased)
    (bert_cased / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    bert_options = root / "bert_options"
    shutil.copytree(bert, bert_options)
    options = {"do_lower_case": False, "strip_accents": True, "tokenize_chinese_chars": False}
    (bert_options / "tokenizer_config.json").write_text(json.dumps(options))

    gpt2 = root / "gpt2"
    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        corpus, vocab_size=700, min_frequency=2, special_tokens=[], show_progress=False
    )
    gpt2.mkdir()
    trainer.save_model(str(gpt2))
    vocab = json.loads((gpt2 / "vocab.json").read_text(encoding="utf-8"))
    vocab["<|endoftext|>"] = len(vocab)  # last, as GPT-2's 50256
    (gpt2 / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return {
        "root": root,
        "marian": marian,
        "marian_separate": marian_separate,
        "bert": bert,
        "bert_cased": bert_cased,
        "bert_options": bert_options,
        "gpt2": gpt2,
        "corpus": corpus,
    }


def load_transformers(cls_name, folder, **kwargs):
    return getattr(transformers, cls_name).from_pretrained(str(folder), **kwargs)


# ---------------------------------------------------------------------------------------
# MarianTokenizer


def assert_same_ids_but_ties(ours, theirs, texts, model_proto):
    """`ours == theirs` row by row, except where the SentencePiece builds break a tie.

    tensorflow-text's build of SentencePiece and the `sentencepiece` package (which
    transformers uses) can pick different unigram segmentations of equal score, e.g.
    ";;;" as ";;" + ";" or as ";" + ";;". Each row that differs must be such a tie:
    the same text in pieces of the same total score. Returns the number of ties.
    """
    import tensorflow_text

    splitter = tensorflow_text.SentencepieceTokenizer(model=model_proto, out_type=tf.string)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)

    def score(pieces):
        return sum(processor.get_score(processor.piece_to_id(piece)) for piece in pieces)

    ties = 0
    assert len(ours) == len(theirs) == len(texts)
    for text, our_row, their_row in zip(texts, ours, theirs):
        if our_row == their_row:
            continue
        our_pieces = [piece.decode() for piece in splitter.tokenize(text).numpy()]
        their_pieces = processor.encode(text, out_type=str)
        assert our_pieces != their_pieces, (text, our_row, their_row)
        assert "".join(our_pieces) == "".join(their_pieces), text
        assert score(our_pieces) == pytest.approx(score(their_pieces), abs=1e-4), text
        assert len(our_row) == len(their_row), text
        ties += 1
    assert ties <= 0.02 * len(texts)
    return ties


def test_marian_ids_and_decoding_match_transformers(folders):
    theirs = load_transformers("MarianTokenizer", folders["marian"])
    ours = MarianTokenizer.from_huggingface(folders["marian"])
    texts = SENTENCES + [
        ">>de<< A man.",
        ">>fr<<Hund",
        ">>xx<< unknown code",
        "no >>de<< code here",
        "x </s> y <unk> z<pad>q",
        "</s>>>de<< after a special token",
    ]
    expected = theirs(texts)["input_ids"]
    source = (folders["marian"] / "source.spm").read_bytes()
    target_model = (folders["marian"] / "target.spm").read_bytes()
    assert assert_same_ids_but_ties(ours.encode(texts), expected, texts, source) <= 2
    assert ours.encode(texts[20]) == expected[20]
    assert any(ours.unk_id in row[:-1] for row in expected)  # the <unk> path is exercised
    assert (ours.pad_id, ours.end_id, ours.unk_id, ours.start_id) == (
        theirs.pad_token_id,
        theirs.eos_token_id,
        theirs.unk_token_id,
        theirs.pad_token_id,
    )
    assert ours.pad_id == ours.vocabulary_size - 1 == len(theirs) - 1
    # Decoding stops at the first </s>; before it, it is transformers' decode.
    ids = [row for row in expected if ours.end_id not in row[:-1]]
    assert ours.decode(ids) == [theirs.decode(row, skip_special_tokens=True) for row in ids]
    target = theirs(text_target=texts)["input_ids"]
    our_target = [row + [ours.end_id] for row in ours.tokenize_target(texts).to_list()]
    assert_same_ids_but_ties(our_target, target, texts, target_model)
    assert ours.decode(target[:50]) == theirs.batch_decode(target[:50], skip_special_tokens=True)


def test_marian_separate_vocabularies(folders):
    theirs = load_transformers("MarianTokenizer", folders["marian_separate"])
    ours = MarianTokenizer.from_huggingface(folders["marian_separate"])
    assert ours.separate_vocabs and theirs.separate_vocabs
    texts = SENTENCES[:100]
    source = (folders["marian_separate"] / "source.spm").read_bytes()
    target_model = (folders["marian_separate"] / "target.spm").read_bytes()
    assert_same_ids_but_ties(ours.encode(texts), theirs(texts)["input_ids"], texts, source)
    target = [row + [ours.end_id] for row in ours.tokenize_target(texts).to_list()]
    expected = theirs(text_target=texts)["input_ids"]
    assert_same_ids_but_ties(target, expected, texts, target_model)
    assert ours.decode(target) == theirs.batch_decode(target, skip_special_tokens=True)
    assert ours.target_vocabulary_size == len(ours.target_vocabulary)
    with open(folders["marian_separate"] / "target_vocab.json") as file:
        assert ours.target_vocabulary_size == len(json.load(file))


def test_marian_runs_inside_tf_function_and_tf_data(folders):
    ours = MarianTokenizer.from_huggingface(folders["marian"])
    texts = tf.constant(SENTENCES[:40])
    eager = ours.tokenize(texts)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(batch):
        ids = ours.tokenize(batch)
        return ids, ours.detokenize(ids)

    ids, decoded = round_trip(texts)
    assert ids.to_list() == eager.to_list()
    assert decoded.numpy().tolist() == ours.detokenize(eager).numpy().tolist()
    scalar = tf.function(ours.tokenize)(tf.constant(SENTENCES[20]))
    assert scalar.numpy().tolist() == ours.tokenize(SENTENCES[20]).numpy().tolist()
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES[:8]).map(ours.tokenize)
    assert [row.numpy().tolist() for row in dataset] == eager.to_list()[:8]


def test_marian_exports_in_a_saved_model(folders, tmp_path):
    import keras

    ours = MarianTokenizer.from_huggingface(folders["marian"])
    keras.backend.clear_session()  # the SentencePiece resources outlive it

    class Serving(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, texts):
            ids = self.tokenizer.tokenize(texts)
            return {"ids": ids.to_tensor(-1), "texts": self.tokenizer.detokenize(ids)}

    module = Serving(ours)
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.serve})
    del module, ours
    serve = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    texts = SENTENCES[:20] + [">>de<< x </s> y"]
    outputs = serve(texts=tf.constant(texts))
    ours = MarianTokenizer.from_huggingface(folders["marian"])
    expected = ours.tokenize(texts)
    assert outputs["ids"].numpy().tolist() == expected.to_tensor(-1).numpy().tolist()
    assert outputs["texts"].numpy().tolist() == ours.detokenize(expected).numpy().tolist()


def test_marian_from_subword_tokenizer(folders, tmp_path):
    subword = SubwordTokenizer.train(folders["corpus"], vocabulary_size=500)
    marian = MarianTokenizer.from_subword_tokenizer(subword)
    assert (marian.pad_id, marian.unk_id, marian.start_id, marian.end_id) == (0, 1, 2, 3)
    assert marian.vocabulary_size == subword.vocabulary_size
    expected = subword.tokenize(SENTENCES)
    assert marian.tokenize(SENTENCES).to_list() == expected.to_list()
    assert marian.encode(SENTENCES) == [row + [3] for row in expected.to_list()]
    assert marian.decode(expected) == [text.strip() for text in subword.decode(expected)]
    marian.save_huggingface(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(theirs).__name__ == "MarianTokenizer"
    assert theirs(SENTENCES)["input_ids"] == marian.encode(SENTENCES)
    ids = marian.encode(SENTENCES)
    assert marian.decode(ids) == theirs.batch_decode(ids, skip_special_tokens=True)
    with pytest.raises(ValueError, match="must be a `SubwordTokenizer`"):
        MarianTokenizer.from_subword_tokenizer(marian)


# ---------------------------------------------------------------------------------------
# WordPieceTokenizer


@pytest.mark.parametrize("folder", ["bert", "bert_cased", "bert_options"])
def test_wordpiece_ids_and_decoding_match_transformers(folders, folder):
    ours = WordPieceTokenizer.from_huggingface(folders[folder])
    texts = SENTENCES + ["x [MASK] y [cls] [SEP]z", "[CLS][UNK] [PAD]"]
    assert ours.lowercase == (folder == "bert")
    for class_name in ("BertTokenizer", "BertTokenizerFast"):
        theirs = load_transformers(class_name, folders[folder])
        expected = theirs(texts)["input_ids"]
        assert ours.encode(texts) == expected, class_name
        assert any(ours.unk_id in row for row in expected)
        ids = [row for row in expected if ours.end_id not in row[1:-1]]
        assert ours.decode(ids) == theirs.batch_decode(ids, skip_special_tokens=True)
    assert (ours.pad_id, ours.unk_id, ours.start_id, ours.end_id, ours.mask_id) == (
        theirs.pad_token_id,
        theirs.unk_token_id,
        theirs.cls_token_id,
        theirs.sep_token_id,
        theirs.mask_token_id,
    )
    assert ours.vocabulary_size == len(theirs)


def test_wordpiece_matches_the_python_bert_tokenizer_on_composed_text(folders):
    # transformers 4's Python BertTokenizer (now BertTokenizerLegacy) NFC-normalises
    # first; on text already in NFC it gives the same ids.
    legacy = getattr(transformers, "BertTokenizerLegacy", None)
    if legacy is None:
        pytest.skip("this transformers has no BertTokenizerLegacy")
    import unicodedata

    texts = [text for text in SENTENCES if unicodedata.normalize("NFC", text) == text]
    ours = WordPieceTokenizer.from_huggingface(folders["bert"])
    assert ours.encode(texts) == legacy.from_pretrained(str(folders["bert"]))(texts)["input_ids"]


# ---------------------------------------------------------------------------------------
# BytePairTokenizer


@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_byte_pair_ids_and_decoding_match_transformers(folders, add_prefix_space):
    folder = folders["gpt2"]
    if add_prefix_space:
        folder = folders["root"] / "gpt2_prefix"
        shutil.copytree(folders["gpt2"], folder, dirs_exist_ok=True)
        (folder / "tokenizer_config.json").write_text(json.dumps({"add_prefix_space": True}))
    ours = BytePairTokenizer.from_huggingface(folder)
    assert ours.add_prefix_space == add_prefix_space
    texts = SENTENCES + ["a <|endoftext|> b<|endoftext|>", "<|endoftext|>"]
    for class_name in ("GPT2Tokenizer", "GPT2TokenizerFast"):
        theirs = load_transformers(class_name, folder)
        expected = theirs(texts)["input_ids"]
        assert ours.encode(texts) == expected, class_name
        ids = expected[: len(SENTENCES)]
        decoded = theirs.batch_decode(ids, skip_special_tokens=True)
        assert ours.decode(ids) == decoded
    if not add_prefix_space:
        assert decoded == SENTENCES  # byte-level BPE loses nothing
    end_of_text = theirs.convert_tokens_to_ids("<|endoftext|>")
    assert ours.end_id == ours.pad_id == ours.start_id == ours.unk_id == end_of_text
    assert ours.vocabulary_size == len(theirs)


# ---------------------------------------------------------------------------------------
# All three


def load_ours(folders, name):
    cls = {"marian": MarianTokenizer, "bert": WordPieceTokenizer, "gpt2": BytePairTokenizer}
    return cls[name].from_huggingface(folders[name])


TRANSFORMERS_CLASSES = {
    "marian": "MarianTokenizer",
    "bert": "BertTokenizer",
    "gpt2": "GPT2Tokenizer",
}


@pytest.mark.parametrize("name", ["marian", "bert", "gpt2"])
def test_save_huggingface_loads_in_transformers(folders, name, tmp_path):
    ours = load_ours(folders, name)
    ours.save_huggingface(tmp_path / "hf")
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert type(theirs).__name__ == TRANSFORMERS_CLASSES[name]
    if name == "marian":
        source = (folders["marian"] / "source.spm").read_bytes()
        expected = theirs(SENTENCES)["input_ids"]
        assert_same_ids_but_ties(ours.encode(SENTENCES), expected, SENTENCES, source)
    else:
        assert theirs(SENTENCES)["input_ids"] == ours.encode(SENTENCES)
    # save / load (what save_pretrained and load_pretrained call) keeps the ids.
    assert TOKENIZER_CLASSES[type(ours).__name__] is type(ours)
    ours.save(tmp_path / "saved")
    loaded = type(ours).load(tmp_path / "saved")
    assert loaded.encode(SENTENCES) == ours.encode(SENTENCES)
    assert loaded.vocabulary_size == ours.vocabulary_size
    assert (loaded.pad_id, loaded.start_id, loaded.end_id) == (
        ours.pad_id,
        ours.start_id,
        ours.end_id,
    )


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_folders_saved_by_transformers_5(folders, name, tmp_path):
    # transformers 5 saves tokenizer.json and tokenizer_config.json only.
    theirs = load_transformers(TRANSFORMERS_CLASSES[name], folders[name])
    theirs.save_pretrained(str(tmp_path))
    assert not (tmp_path / "vocab.txt").exists() and not (tmp_path / "merges.txt").exists()
    ours = load_ours({name: tmp_path}, name)
    assert ours.encode(SENTENCES) == theirs(SENTENCES)["input_ids"]


@pytest.mark.parametrize("name", ["marian", "bert", "gpt2"])
def test_interface_layouts(folders, name):
    ours = load_ours(folders, name)
    single = ours.tokenize("A man in a blue shirt.")
    assert isinstance(single, tf.Tensor) and single.dtype == tf.int32 and single.shape.rank == 1
    batch = ours.tokenize(["A man in a blue shirt.", "", "Zwei Hunde."])
    assert isinstance(batch, tf.RaggedTensor) and batch.dtype == tf.int32
    assert batch.shape.as_list() == [3, None] and batch.row_lengths().numpy()[1] == 0
    assert ours.tokenize(tf.constant(["A man in a blue shirt."])).to_list()[0] == (
        single.numpy().tolist()
    )
    assert ours.tokenize(tf.constant("A man in a blue shirt.")).numpy().tolist() == (
        single.numpy().tolist()
    )
    assert ours.tokenize([]).shape.as_list() == [0, None]
    assert ours.encode("A man in a blue shirt.") == ours.encode(["A man in a blue shirt."])[0]
    with pytest.raises(ValueError, match="rank 0 or 1"):
        ours.tokenize([["a"]])
    # Decoding: start and pad ids are dropped, and everything from the first end id on
    # (GPT-2's start id is its end id: a row starting with it decodes to nothing).
    ids = single.numpy().tolist()
    start = [ours.start_id] if ours.start_id != ours.end_id else []
    row = [*start, *ids, ours.end_id, *ids, ours.pad_id]
    text = ours.decode(ids)
    assert ours.decode(row) == text
    assert ours.detokenize(row).shape.rank == 0
    padded = tf.constant([row, [*start, *ids, ours.end_id, *[ours.pad_id] * (len(ids) + 1)]])
    assert ours.decode(padded) == [text, text]
    assert ours.detokenize(tf.RaggedTensor.from_tensor(padded)).shape.as_list() == [2]
    with pytest.raises(ValueError, match="rank 1"):
        ours.detokenize(tf.zeros([1, 1, 1], tf.int32))
    pieces = ours.id_to_piece(single).numpy()
    assert pieces.shape == (len(ids),) and all(isinstance(piece, bytes) for piece in pieces)
    for attribute in ("vocabulary_size", "pad_id", "unk_id", "start_id", "end_id"):
        assert isinstance(getattr(ours, attribute), int), attribute


def test_python_tokenizers_run_in_tf_data(folders):
    for ours in (load_ours(folders, "bert"), load_ours(folders, "gpt2")):
        dataset = tf.data.Dataset.from_tensor_slices(SENTENCES[:6]).batch(3).map(ours.tokenize)
        rows = [row for batch in dataset for row in batch.to_list()]
        assert rows == ours.tokenize(SENTENCES[:6]).to_list()
        decoded = tf.function(ours.detokenize)(ours.tokenize(SENTENCES[:6]))
        assert decoded.numpy().tolist() == ours.detokenize(rows).numpy().tolist()
        single = tf.data.Dataset.from_tensor_slices(SENTENCES[:3]).map(ours.tokenize)
        assert [row.numpy().tolist() for row in single] == rows[:3]
        empty = tf.function(ours.detokenize)(tf.zeros([0, 4], tf.int32))
        assert empty.shape.as_list() == [0]


@pytest.mark.parametrize(
    "name, removed, message",
    [
        ("marian", "source.spm", "'source.spm' is missing"),
        ("marian", "target.spm", "'target.spm' is missing"),
        ("marian", "vocab.json", "'vocab.json' is missing"),
        ("marian_separate", "target_vocab.json", "'target_vocab.json' is missing"),
        ("bert", "vocab.txt", "'vocab.txt' is missing"),
        ("gpt2", "vocab.json", "'vocab.json' is missing"),
        ("gpt2", "merges.txt", "'merges.txt' is missing"),
    ],
)
def test_missing_files_are_named(folders, tmp_path, name, removed, message):
    shutil.copytree(folders[name], tmp_path / name)
    (tmp_path / name / removed).unlink()
    cls = {"marian": MarianTokenizer, "bert": WordPieceTokenizer, "gpt2": BytePairTokenizer}
    with pytest.raises(ValueError, match=message):
        cls[name.split("_")[0]].from_huggingface(tmp_path / name)


def test_bad_arguments_are_named(folders):
    with pytest.raises(ValueError, match="not a folder"):
        WordPieceTokenizer.from_huggingface(folders["root"] / "nowhere")
    with pytest.raises(ValueError, match="`unk_token='<oov>'` is not in the vocabulary"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], unk_token="<oov>")
    with pytest.raises(ValueError, match="`lowercase` must be a bool"):
        WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]"], lowercase="yes")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        BytePairTokenizer({"a": 0, "<|endoftext|>": 1}, merges=["a b"])
    with pytest.raises(ValueError, match="is not a valid SentencePiece model"):
        MarianTokenizer(b"not a model", b"not a model", {"<unk>": 0, "</s>": 1, "<pad>": 2})
    bad = folders["root"] / "bad_json"
    shutil.copytree(folders["gpt2"], bad)
    (bad / "vocab.json").write_text("{not json")
    with pytest.raises(ValueError, match="vocab.json' is not valid JSON"):
        BytePairTokenizer.from_huggingface(bad)
