import gzip
import hashlib
import io
import os
import pathlib
import tarfile

import numpy as np
import pytest

from examples.text_classification import data
from examples.text_classification.data import (
    DEFAULT_SST2_DIR,
    IMDB_SPLITS,
    SST2_SPLITS,
    DataDirectoryError,
    DataFormatError,
    clean_imdb_text,
    load_imdb,
    load_sst2,
    train_validation_split,
)
from examples.text_classification.download_imdb import write_jsonl_gz
from tests.fresh_python import run_python

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
SHARED_SST2 = SHARED_DATA / "sst2"
SHARED_IMDB = SHARED_DATA / "imdb"
# sha256 of the uncompressed GLUE files, as listed in shared/data/README.md.
SST2_TSV_SHA256 = {
    "train": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
    "dev": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
    "test": "69a938605609b3e6663b4487918fe1565eb293734e6e520d0366d1d412fd2a13",
}

needs_shared_sst2 = pytest.mark.skipif(
    not SHARED_SST2.is_dir(), reason=f"shared SST-2 copy not found at {SHARED_SST2}"
)
needs_shared_imdb = pytest.mark.skipif(
    not SHARED_IMDB.is_dir(), reason=f"shared IMDB copy not found at {SHARED_IMDB}"
)


def _error_message(info, *paths):
    message = str(info.value)
    assert "\n" not in message, message
    for path in paths:
        assert str(path) in message, message
    return message


# ---------------------------------------------------------------------------------------
# SST-2


def test_constants():
    assert SST2_SPLITS == ("train", "dev", "test")
    assert IMDB_SPLITS == ("train", "test")
    assert os.path.isdir(DEFAULT_SST2_DIR)


@pytest.mark.parametrize(
    "split, count, positives, first_text, first_label",
    [
        ("train", 67349, 37569, "hide new secretions from the parental units", 0),
        ("dev", 872, 444, "it 's a charming and often affecting journey .", 1),
    ],
)
def test_sst2_shipped_splits(split, count, positives, first_text, first_label):
    texts, labels = load_sst2(split)
    assert len(texts) == count
    assert isinstance(labels, np.ndarray) and labels.dtype == np.int32
    assert labels.shape == (count,)
    assert int(labels.sum()) == positives
    assert int((labels == 0).sum()) == count - positives
    assert texts[0] == first_text and int(labels[0]) == first_label
    assert all(isinstance(text, str) and text and text == text.strip() for text in texts)
    assert not any("\t" in text for text in texts)


def test_sst2_label_counts_match_glue():
    assert np.bincount(load_sst2("train")[1]).tolist() == [29780, 37569]
    assert np.bincount(load_sst2("dev")[1]).tolist() == [428, 444]


def test_sst2_test_split_has_no_labels():
    texts, labels = load_sst2("test")
    assert labels is None
    assert len(texts) == 1821
    assert texts[0] == "uneasy mishmash of styles and genres ."


def test_sst2_shipped_files_match_sha256sums_and_originals():
    lines = (pathlib.Path(DEFAULT_SST2_DIR) / "SHA256SUMS").read_text("utf-8").splitlines()
    shipped = dict(reversed(line.split()) for line in lines if line and line[0] != "#")
    comments = [line[1:].split() for line in lines if line.startswith("#")]
    originals = {name: digest for digest, name, *rest in comments if len(digest) == 64}
    assert sorted(shipped) == [
        "SST_original_README.txt",
        "dev.tsv.gz",
        "test.tsv.gz",
        "train.tsv.gz",
    ]
    assert originals == {f"{split}.tsv": digest for split, digest in SST2_TSV_SHA256.items()}
    readme = (pathlib.Path(DEFAULT_SST2_DIR) / "README.md").read_text("utf-8")
    for name, digest in shipped.items():
        data = (pathlib.Path(DEFAULT_SST2_DIR) / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name
        assert digest in readme, name
        if name.endswith(".gz"):
            assert data[4:8] == b"\0\0\0\0", f"{name} has a gzip mtime"
            split = name.split(".")[0]
            original = hashlib.sha256(gzip.decompress(data)).hexdigest()
            assert original == SST2_TSV_SHA256[split], name
            assert original in readme, name


@needs_shared_sst2
@pytest.mark.parametrize("split", SST2_SPLITS)
def test_sst2_from_shared_plain_tsv_equals_shipped_copy(split):
    texts, labels = load_sst2(split, data_dir=SHARED_SST2)
    shipped_texts, shipped_labels = load_sst2(split)
    assert texts == shipped_texts
    if split == "test":
        assert labels is None and shipped_labels is None
    else:
        np.testing.assert_array_equal(labels, shipped_labels)


def _write_sst2(directory, name, text, compress=False):
    path = directory / name
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


def test_sst2_data_dir_reads_tsv_or_gz_and_prefers_plain(tmp_path):
    _write_sst2(tmp_path, "dev.tsv.gz", "sentence\tlabel\na b \t1\nc\td \t0\n", compress=True)
    texts, labels = load_sst2("dev", data_dir=str(tmp_path))
    # Split on the last tab: a tab inside the sentence stays in it.
    assert texts == ["a b", "c\td"] and labels.tolist() == [1, 0]
    _write_sst2(tmp_path, "dev.tsv", "sentence\tlabel\nplain \t0")  # no final newline
    texts, labels = load_sst2("dev", data_dir=tmp_path)
    assert texts == ["plain"] and labels.tolist() == [0]


def test_sst2_missing_data_dir(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(DataDirectoryError) as info:
        load_sst2("train", data_dir=missing)
    message = _error_message(info, missing, "'train.tsv'", "'train.tsv.gz'")
    assert "does not exist" in message
    assert isinstance(info.value, ValueError)


def test_sst2_directory_without_the_files_lists_what_is_there(tmp_path):
    (tmp_path / "train.csv").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DataDirectoryError) as info:
        load_sst2("dev", data_dir=tmp_path)
    _error_message(info, tmp_path, "'dev.tsv'", "'dev.tsv.gz'", "['notes.txt', 'train.csv']")


@pytest.mark.parametrize(
    "content, expected",
    [
        ("", "is empty"),
        ("sentence\tlabel\n", "has a header but no rows"),
        ("text\tlabel\na \t1\n", "line 1: expected the header 'sentence\\tlabel'"),
        ("sentence\tlabel\na \t1\nno tab here\n", "line 3: expected sentence<TAB>label"),
        ("sentence\tlabel\na \t1\nb \t2\n", "line 3: expected sentence<TAB>label"),
        ("sentence\tlabel\na \t1\n\nb \t0\n", "line 3: expected sentence<TAB>label"),
        ("sentence\tlabel\n \t1\n", "line 2: expected sentence<TAB>label"),
    ],
)
def test_sst2_bad_file_names_path_and_line(tmp_path, content, expected):
    path = _write_sst2(tmp_path, "dev.tsv", content)
    with pytest.raises(DataFormatError) as info:
        load_sst2("dev", data_dir=tmp_path)
    assert expected in _error_message(info, path)


def test_sst2_bad_test_row(tmp_path):
    path = _write_sst2(tmp_path, "test.tsv", "index\tsentence\n0\tfine .\nx\tbad .\n")
    with pytest.raises(DataFormatError, match="line 3: expected index<TAB>sentence") as info:
        load_sst2("test", data_dir=tmp_path)
    _error_message(info, path)


def test_sst2_bad_split():
    with pytest.raises(ValueError, match="`split` must be one of"):
        load_sst2("validation")


# ---------------------------------------------------------------------------------------
# IMDB


@pytest.fixture(scope="module")
def imdb():
    if not SHARED_IMDB.is_dir():
        pytest.skip(f"shared IMDB copy not found at {SHARED_IMDB}")
    return {split: load_imdb(split, SHARED_IMDB) for split in IMDB_SPLITS}


@needs_shared_imdb
@pytest.mark.parametrize("split", IMDB_SPLITS)
def test_imdb_counts_and_shuffled_order(imdb, split):
    texts, labels = imdb[split]
    assert len(texts) == 25000
    assert labels.dtype == np.int32 and labels.shape == (25000,)
    assert np.bincount(labels).tolist() == [12500, 12500]
    assert all(isinstance(text, str) and text for text in texts[:1000])
    # The files hold all positives, then all negatives; the loader must mix them.
    assert 0.4 <= labels[:1000].mean() <= 0.6
    assert 0.4 <= labels[-1000:].mean() <= 0.6


@needs_shared_imdb
def test_imdb_texts_stay_with_their_labels(imdb):
    train_texts, train_labels = imdb["train"]
    test_texts, test_labels = imdb["test"]
    (index,) = [i for i, t in enumerate(train_texts) if t.startswith("Bromwell High is a cartoon")]
    assert train_labels[index] == 1
    (index,) = [i for i, t in enumerate(test_texts) if t.startswith("Once again Mr. Costner")]
    assert test_labels[index] == 0
    # The text is kept as stored, HTML line breaks included.
    assert sum("<br />" in text for text in train_texts[:1000]) > 300


@needs_shared_imdb
def test_imdb_train_validation_split_is_stratified_disjoint_and_complete(imdb):
    labels = imdb["train"][1]
    ids = list(range(len(labels)))
    (train_ids, train_labels), (val_ids, val_labels) = train_validation_split(ids, labels)
    assert len(val_ids) == 2500 and len(train_ids) == 22500
    assert np.bincount(val_labels).tolist() == [1250, 1250]
    assert np.bincount(train_labels).tolist() == [11250, 11250]
    assert not set(train_ids) & set(val_ids)
    assert sorted(train_ids + val_ids) == ids
    np.testing.assert_array_equal(labels[train_ids], train_labels)
    np.testing.assert_array_equal(labels[val_ids], val_labels)
    again = train_validation_split(ids, labels)
    assert again[1][0] == val_ids and again[0][0] == train_ids
    assert train_validation_split(ids, labels, seed=1)[1][0] != val_ids


def _tiny_imdb(directory, count=200):
    records = [
        {"id": i % (count // 2), "rating": 9 if i < count // 2 else 2, "label": int(i < count // 2)}
        for i in range(count)
    ]
    for i, record in enumerate(records):
        record["text"] = f"review {i}<br />é"
    write_jsonl_gz(directory / "train.jsonl.gz", records)
    return records


def test_imdb_shuffle_depends_only_on_seed(tmp_path):
    records = _tiny_imdb(tmp_path)
    ordered_texts, ordered_labels = load_imdb("train", tmp_path, shuffle=False)
    assert ordered_texts == [record["text"] for record in records]
    assert ordered_labels.tolist() == [record["label"] for record in records]
    texts, labels = load_imdb("train", tmp_path)
    assert sorted(texts) == sorted(ordered_texts) and texts != ordered_texts
    label_of = {record["text"]: record["label"] for record in records}
    assert labels.tolist() == [label_of[text] for text in texts]
    assert load_imdb("train", str(tmp_path), seed=0)[0] == texts
    other_texts, other_labels = load_imdb("train", tmp_path, seed=1)
    assert other_texts != texts and sorted(other_texts) == sorted(texts)
    assert int(other_labels.sum()) == 100


def test_imdb_missing_data_dir(tmp_path):
    missing = tmp_path / "imdb"
    with pytest.raises(DataDirectoryError) as info:
        load_imdb("train", missing)
    message = _error_message(info, missing, "'train.jsonl.gz'", "download_imdb")
    assert "does not exist" in message
    with pytest.raises(DataDirectoryError, match="`data_dir` is required") as info:
        load_imdb("train", None)
    # The messages name what a user has: the downloader, not a folder beside a clone.
    assert "shared" not in message + _error_message(info, "download_imdb")


def test_imdb_directory_without_the_file(tmp_path):
    (tmp_path / "train.jsonl").write_text("{}")
    with pytest.raises(DataDirectoryError) as info:
        load_imdb("test", tmp_path)
    _error_message(info, tmp_path, "'test.jsonl.gz'", "['train.jsonl']")


@pytest.mark.parametrize(
    "lines, expected",
    [
        ([], "is empty"),
        (['{"id": 0, "rating": 9, "label": 1, "text": "ok"}', "{not json"], "line 2:"),
        (['{"id": 0, "rating": 9, "label": 2, "text": "ok"}'], "line 1:"),
        (['{"id": 0, "rating": 9, "label": true, "text": "ok"}'], "line 1:"),
        (['{"id": 0, "rating": 9, "label": 1}'], "line 1:"),
        (['["id", "rating", "label", "text"]'], "line 1:"),
    ],
)
def test_imdb_bad_file_names_path_and_line(tmp_path, lines, expected):
    path = tmp_path / "test.jsonl.gz"
    path.write_bytes(gzip.compress("".join(line + "\n" for line in lines).encode(), mtime=0))
    with pytest.raises(DataFormatError) as info:
        load_imdb("test", tmp_path)
    assert expected in _error_message(info, path)


def test_imdb_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="`split` must be one of"):
        load_imdb("dev", tmp_path)
    with pytest.raises(ValueError, match="`seed` must be an int"):
        load_imdb("train", tmp_path, seed=0.5)


def test_clean_imdb_text():
    text = "One.<br /><br />Two<br/>three<br>four<BR />five <br  />six"
    assert clean_imdb_text(text) == "One.  Two three four five  six"
    assert clean_imdb_text("no tags, a < b > c") == "no tags, a < b > c"
    assert clean_imdb_text("") == ""
    with pytest.raises(TypeError, match="`text` must be a str"):
        clean_imdb_text(b"bytes<br />")


def test_train_validation_split_small_and_rounding():
    texts = [f"t{i}" for i in range(13)]
    labels = np.array([0] * 10 + [1] * 3, dtype=np.int32)
    (train_x, train_y), (val_x, val_y) = train_validation_split(texts, labels, 0.2, seed=3)
    # round(10 * 0.2) = 2 negatives and round(3 * 0.2) = 1 positive held out.
    assert sorted(val_y.tolist()) == [0, 0, 1]
    assert len(train_x) == 10 and train_y.dtype == np.int32
    assert sorted(train_x + val_x) == sorted(texts)
    assert all(labels[int(t[1:])] == y for t, y in zip(train_x + val_x, [*train_y, *val_y]))


@pytest.mark.parametrize(
    "texts, labels, fraction, match",
    [
        (["a", "b"], [0], 0.5, "same length"),
        (["a", "b"], [[0], [1]], 0.5, "1-D"),
        (["a", "b", "c", "d"], [0, 1, 0, 1], 0.0, "validation_fraction"),
        (["a", "b", "c", "d"], [0, 1, 0, 1], 1.0, "validation_fraction"),
        (["a", "b", "c", "d"], [0, 1, 0, 1], True, "validation_fraction"),
        (["a", "b", "c", "d"], [0, 1, 0, 1], 0.1, "both must be non-empty"),
    ],
)
def test_train_validation_split_bad_arguments(texts, labels, fraction, match):
    with pytest.raises(ValueError, match=match):
        train_validation_split(texts, labels, fraction)


# ---------------------------------------------------------------------------------------
# download_imdb


def _add(tar, name, text):
    data = text.encode("utf-8")
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


TINY_REVIEWS = {
    # Archive order is not id order; ids 10 and 2 check a numeric sort.
    "aclImdb/train/pos/10_8.txt": "Ten.<br /><br />Good.",
    "aclImdb/train/pos/2_10.txt": "Two\twith a tab.",
    "aclImdb/train/neg/1_1.txt": "Awful.",
    "aclImdb/train/neg/0_4.txt": " Meh. ",
    "aclImdb/test/neg/0_2.txt": "Once again.",
    "aclImdb/test/pos/0_9.txt": "Amélie — «très bien» 😀",
    "aclImdb/test/pos/1_7.txt": "Fine.",
}


@pytest.fixture(scope="module")
def tiny_tarball(tmp_path_factory):
    path = tmp_path_factory.mktemp("tarball") / "aclImdb_v1.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        directory = tarfile.TarInfo("aclImdb")
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
        _add(tar, "aclImdb/README", "Large Movie Review Dataset v1.0\n")
        _add(tar, "aclImdb/imdb.vocab", "the\nand\n")
        _add(tar, "aclImdb/train/labeledBow.feat", "9 0:1\n")
        _add(tar, "aclImdb/train/unsup/0_0.txt", "Unlabeled, must be skipped.")
        _add(tar, "aclImdb/train/urls_pos.txt", "http://www.imdb.com/title/tt0/\n")
        for name, text in TINY_REVIEWS.items():
            _add(tar, name, text)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _run_download(*args):
    return run_python("-m", "examples.text_classification.download_imdb", *args, timeout=60)


def _read_jsonl_gz(path):
    raw = path.read_bytes()
    assert raw[4:8] == b"\0\0\0\0", f"{path} has a gzip mtime"
    return gzip.decompress(raw).decode("utf-8")


def test_download_writes_the_shared_layout(tmp_path, tiny_tarball):
    tarball, digest = tiny_tarball
    output = tmp_path / "out" / "imdb"
    result = _run_download("--output-dir", output, "--url", tarball.as_uri(), "--sha256", digest)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "train: 4 reviews (2 pos, 2 neg)" in result.stdout
    assert sorted(os.listdir(output)) == ["aclImdb_README.txt", "test.jsonl.gz", "train.jsonl.gz"]
    assert sorted(os.listdir(output.parent)) == ["imdb"]  # no staging folder left behind
    assert (output / "aclImdb_README.txt").read_text() == "Large Movie Review Dataset v1.0\n"
    train = _read_jsonl_gz(output / "train.jsonl.gz")
    assert train == (
        '{"id": 2, "rating": 10, "label": 1, "text": "Two\\twith a tab."}\n'
        '{"id": 10, "rating": 8, "label": 1, "text": "Ten.<br /><br />Good."}\n'
        '{"id": 0, "rating": 4, "label": 0, "text": " Meh. "}\n'
        '{"id": 1, "rating": 1, "label": 0, "text": "Awful."}\n'
    )
    test = _read_jsonl_gz(output / "test.jsonl.gz")
    assert test == (
        '{"id": 0, "rating": 9, "label": 1, "text": "Amélie — «très bien» 😀"}\n'
        '{"id": 1, "rating": 7, "label": 1, "text": "Fine."}\n'
        '{"id": 0, "rating": 2, "label": 0, "text": "Once again."}\n'
    )
    texts, labels = load_imdb("test", output, shuffle=False)
    assert texts == ["Amélie — «très bien» 😀", "Fine.", "Once again."]
    assert labels.tolist() == [1, 1, 0]
    for name in ("train.jsonl.gz", "test.jsonl.gz"):
        file_digest = hashlib.sha256((output / name).read_bytes()).hexdigest()
        assert f"{file_digest}  {name}" in result.stdout

    # A failed run into the existing output leaves it as it was.
    before = {name: (output / name).read_bytes() for name in os.listdir(output)}
    result = _run_download("--output-dir", output, "--url", tarball.as_uri(), "--sha256", "0" * 64)
    assert result.returncode == 2
    assert {name: (output / name).read_bytes() for name in os.listdir(output)} == before
    assert sorted(os.listdir(output.parent)) == ["imdb"]

    # A second good run replaces the files with identical bytes and keeps other files.
    (output / "keep.txt").write_text("mine")
    result = _run_download("--output-dir", output, "--url", tarball.as_uri(), "--sha256", digest)
    assert result.returncode == 0, result.stderr
    assert (output / "keep.txt").read_text() == "mine"
    assert {name: (output / name).read_bytes() for name in before} == before


def _assert_one_line_error(result, *parts):
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for part in parts:
        assert part in lines[0], lines[0]


def test_download_wrong_sha256(tmp_path, tiny_tarball):
    tarball, digest = tiny_tarball
    output = tmp_path / "imdb"
    wrong = "f" * 64
    result = _run_download("--output-dir", output, "--url", tarball.as_uri(), "--sha256", wrong)
    _assert_one_line_error(result, "SHA-256 mismatch", wrong, digest)
    assert not output.exists() and os.listdir(tmp_path) == []


def test_download_missing_url_file(tmp_path):
    output = tmp_path / "imdb"
    url = (tmp_path / "missing.tar.gz").as_uri()
    result = _run_download("--output-dir", output, "--url", url, "--sha256", "0" * 64)
    _assert_one_line_error(result, "cannot download", url)
    assert not output.exists() and os.listdir(tmp_path) == []


def test_download_bad_tarball(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"this is not a tarball")
    digest = hashlib.sha256(bad.read_bytes()).hexdigest()
    output = tmp_path / "imdb"
    result = _run_download("--output-dir", output, "--url", bad.as_uri(), "--sha256", digest)
    _assert_one_line_error(result, "is not a readable .tar.gz")
    assert not output.exists() and os.listdir(tmp_path) == ["bad.tar.gz"]


def test_download_bad_flags(tmp_path):
    result = _run_download("--output-dir", tmp_path / "imdb", "--sha256", "xyz")
    assert result.returncode == 2
    assert "--sha256" in result.stderr and "64 hexadecimal digits" in result.stderr
    result = _run_download("--url", "file:///nowhere")
    assert result.returncode == 2 and "--output-dir" in result.stderr
    assert os.listdir(tmp_path) == []


def test_sst2_sentence_holdout_leaves_no_overlapping_phrase():
    texts, labels = data.load_sst2("train")
    (train_x, train_y), (val_x, val_y) = data.sst2_sentence_holdout(texts, labels, seed=3)
    assert len(val_x) == 1000 and min(len(t.split()) for t in val_x) >= 12
    assert 0.4 < float(np.mean(val_y)) < 0.65
    # Every phrase is in exactly one part, or dropped for overlapping a held-out one.
    assert len(train_x) + len(val_x) < len(texts)
    assert not set(train_x) & set(val_x)
    held = [f" {t} " for t in val_x[:200]]
    long_train = [f" {t} " for t in train_x if len(t.split()) >= 4]
    assert not [t for t in long_train for h in held if t in h or h in t]
    label_of = dict(zip(texts, labels.tolist()))
    assert [label_of[t] for t in val_x[:50]] == val_y[:50].tolist()
    again = data.sst2_sentence_holdout(texts, labels, seed=3)
    assert again[1][0] == val_x and again[0][0] == train_x
    assert data.sst2_sentence_holdout(texts, labels, seed=4)[1][0] != val_x
    with pytest.raises(ValueError, match="Only 0 phrases have 1000 words or more"):
        data.sst2_sentence_holdout(texts, labels, min_words=1000)
