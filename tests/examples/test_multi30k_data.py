import gzip
import hashlib
import os

import pytest

from examples.translation.data import DEFAULT_DATA_DIR, load_multi30k


def _write_gz(path, text):
    with gzip.open(path, "wt", encoding="utf-8", newline="") as file:
        file.write(text)


@pytest.mark.parametrize(
    "split, count", [("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)]
)
def test_in_repo_split_sizes(split, count):
    pairs = load_multi30k(split)
    assert len(pairs) == count
    assert all(isinstance(s, str) and isinstance(t, str) for s, t in pairs)
    assert sum(1 for s, t in pairs if not s or not t) == 0


def test_first_lines_are_aligned_translations():
    source, target = load_multi30k("train")[0]
    assert source == "Two young, White males are outside near many bushes."
    assert target == "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."
    source, target = load_multi30k("test_2016_flickr")[0]
    assert source == "A man in an orange hat starring at something."
    assert target == "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."


def test_reversed_direction_and_limit():
    pairs = load_multi30k("val", source="de", target="en", limit=3)
    assert len(pairs) == 3
    assert pairs == [(t, s) for s, t in load_multi30k("val")[:3]]
    assert load_multi30k("val", limit=0) == []


def test_in_repo_files_match_recorded_sha256():
    with open(os.path.join(DEFAULT_DATA_DIR, "SHA256SUMS"), encoding="utf-8") as file:
        expected = dict(reversed(line.split()) for line in file if line.strip())
    assert len(expected) == 6
    for name, digest in expected.items():
        with open(os.path.join(DEFAULT_DATA_DIR, name), "rb") as file:
            assert hashlib.sha256(file.read()).hexdigest() == digest, name
    readme = open(os.path.join(DEFAULT_DATA_DIR, "README.md"), encoding="utf-8").read()
    assert all(digest in readme for digest in expected.values())


def test_custom_data_dir_keeps_raw_text(tmp_path):
    # U+2028 and a trailing space must survive: only "\n" separates sentences.
    _write_gz(tmp_path / "tiny.en.gz", "A dog.\nA cat\u2028sleeps. \n")
    _write_gz(tmp_path / "tiny.de.gz", "Ein Hund.\nEine Katze schläft.")
    pairs = load_multi30k("tiny", data_dir=str(tmp_path))
    assert pairs == [("A dog.", "Ein Hund."), ("A cat\u2028sleeps. ", "Eine Katze schläft.")]


def test_missing_file_names_the_path(tmp_path):
    _write_gz(tmp_path / "train.en.gz", "A dog.\n")
    with pytest.raises(ValueError, match="train.de.gz") as info:
        load_multi30k("train", data_dir=tmp_path)
    assert str(tmp_path / "train.de.gz") in str(info.value)
    with pytest.raises(ValueError, match="validation.en.gz"):
        load_multi30k("validation")


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    _write_gz(tmp_path / "val.en.gz", "one\ntwo\nthree\n")
    _write_gz(tmp_path / "val.de.gz", "eins\nzwei\n")
    with pytest.raises(ValueError, match="not line-aligned") as info:
        load_multi30k("val", data_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "val.en.gz") in message and "has 3 lines" in message
    assert str(tmp_path / "val.de.gz") in message and "has 2" in message


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"limit": -1}, "limit"),
        ({"limit": 1.5}, "limit"),
        ({"target": "en"}, "source"),
        ({"source": "../en"}, "source"),
        ({"split": ""}, "split"),
    ],
)
def test_bad_arguments_raise(kwargs, name):
    kwargs = {"split": "val", **kwargs}
    with pytest.raises(ValueError, match=f"`{name}`"):
        load_multi30k(**kwargs)
