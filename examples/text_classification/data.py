"""Loaders for the SST-2 and IMDB sentiment data used by the text classification example.

SST-2 (GLUE) ships with this repository in `examples/text_classification/data/sst2/`.
IMDB (aclImdb v1.0, 50,000 reviews) is too large to ship: `load_imdb` reads a folder
holding `train.jsonl.gz` and `test.jsonl.gz`: the output of
`python -m examples.text_classification.download_imdb --output-dir DIR`.
"""

import gzip
import json
import os
import re

import numpy as np

DEFAULT_SST2_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sst2")
# `"dev"` is GLUE's validation set; `"test"` is GLUE's test set, whose labels are hidden.
# Both data sets' labels, by index.
LABELS = ("negative", "positive")
SST2_SPLITS = ("train", "dev", "test")
IMDB_SPLITS = ("train", "test")

_SST2_HEADERS = {"train": "sentence\tlabel", "dev": "sentence\tlabel", "test": "index\tsentence"}
_IMDB_KEYS = ("id", "rating", "label", "text")
_BR_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_MAX_LISTED = 10


class DataDirectoryError(ValueError):
    """A data folder is missing, or does not hold the file a loader needs."""


class DataFormatError(ValueError):
    """A data file is empty or holds a line that does not have the expected format."""


def _describe_contents(directory):
    if not os.path.exists(directory):
        return "the directory does not exist"
    if not os.path.isdir(directory):
        return "it is not a directory"
    names = sorted(os.listdir(directory))
    if not names:
        return "the directory is empty"
    shown = names[:_MAX_LISTED]
    more = f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else ""
    return f"found {shown}{more}"


def _find_file(data_dir, names, dataset, hint):
    """Returns the first of `names` present in `data_dir`, or raises `DataDirectoryError`."""
    for name in names:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    expected = " or ".join(repr(name) for name in names)
    raise DataDirectoryError(
        f"{dataset} data not found in '{data_dir}': expected {expected}, but "
        f"{_describe_contents(data_dir)}. {hint}"
    )


def _read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as file:
            data = file.read()
    except (OSError, EOFError) as error:
        raise DataFormatError(f"Cannot read '{path}': {error}. Restore the file.") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(
            f"'{path}' is not valid UTF-8 (byte {error.start}). Restore the file."
        ) from error


def _split_lines(text, path):
    if not text:
        raise DataFormatError(f"'{path}' is empty. Restore the file from its source.")
    # Only "\n" ends a row (`str.splitlines` would also break on U+2028 and friends).
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _clip(line, size=60):
    return repr(line if len(line) <= size else line[:size] + "...")


def load_sst2(split, data_dir=None):
    """Loads one split of GLUE SST-2 (binary sentiment of movie-review sentences).

    The sentences are lowercased, tokenized (PTB style: `it 's`, `n't`) movie-review
    phrases from the Stanford Sentiment Treebank. Each row is split on its last tab
    and the sentence is stripped (GLUE leaves a space before the tab).

    Args:
        split: str, `"train"` (67,349 labeled sentences), `"dev"` (872, GLUE's
            validation set: report accuracy on it) or `"test"` (1,821 sentences
            whose labels GLUE keeps hidden; returned with `labels=None`).
        data_dir: str, folder holding `{split}.tsv` or `{split}.tsv.gz` (the plain file
            is read if both are there), e.g. GLUE's unzipped `SST-2/`. Defaults to
            `None`, the gzipped copy in `examples/text_classification/data/sst2/`.

    Returns:
        A tuple `(texts, labels)`: `texts` a list of str in file order; `labels` an
        int32 NumPy array of 0 (negative) / 1 (positive) of the same length, or `None`
        for `"test"`.

    Raises:
        DataDirectoryError: (a `ValueError`) if `data_dir` does not exist or holds no
            file for `split`.
        DataFormatError: (a `ValueError`) if the file is empty, has an unexpected
            header, or a row that is not `sentence<TAB>0|1` (`index<TAB>sentence` for
            `"test"`); the message names the file and line number.
        ValueError: if `split` is not one of `SST2_SPLITS`.

    Example:

    >>> texts, labels = load_sst2("dev")
    >>> texts[0], int(labels[0])
    ("it 's a charming and often affecting journey .", 1)
    """
    if split not in SST2_SPLITS:
        raise ValueError(f"`split` must be one of {SST2_SPLITS}. Received: split={split!r}")
    if data_dir is None:
        data_dir = DEFAULT_SST2_DIR
        names = (f"{split}.tsv.gz",)
    else:
        data_dir = os.fspath(data_dir)
        names = (f"{split}.tsv", f"{split}.tsv.gz")
    path = _find_file(
        data_dir,
        names,
        "SST-2",
        "Pass a `data_dir` holding GLUE's SST-2 files (e.g. its unzipped SST-2/), or "
        f"leave it as None to use the copy in {DEFAULT_SST2_DIR}.",
    )
    lines = _split_lines(_read_text(path), path)
    header = _SST2_HEADERS[split]
    if lines[0] != header:
        raise DataFormatError(
            f"'{path}' line 1: expected the header {header!r}, got {_clip(lines[0])}. "
            "Use GLUE's SST-2 tsv files, which start with that header."
        )
    if len(lines) == 1:
        raise DataFormatError(f"'{path}' has a header but no rows. Restore the file.")
    texts = []
    labels = []
    for number, line in enumerate(lines[1:], start=2):
        if split == "test":
            index, tab, sentence = line.partition("\t")
            valid = bool(tab) and index.isdigit()
            expected = "index<TAB>sentence"
        else:
            sentence, tab, label = line.rpartition("\t")
            valid = bool(tab) and label in ("0", "1")
            expected = "sentence<TAB>label with a label of 0 or 1"
        sentence = sentence.strip()
        if not valid or not sentence:
            raise DataFormatError(
                f"'{path}' line {number}: expected {expected}, got {_clip(line)}. "
                "Restore the file from GLUE's SST-2."
            )
        texts.append(sentence)
        if split != "test":
            labels.append(int(label))
    if split == "test":
        return texts, None
    return texts, np.array(labels, dtype=np.int32)


def load_imdb(split, data_dir, shuffle=True, seed=0):
    """Loads one split of the IMDB Large Movie Review Dataset (aclImdb v1.0).

    Each split holds 25,000 full-length reviews, 12,500 positive (rating 7-10) and
    12,500 negative (rating 1-4). The files list all positive reviews before all
    negative ones, so by default the reviews are returned in a shuffled order that
    depends only on `seed`: the same seed gives the same order on every run and
    machine. The text is returned as stored, `<br />` tags included; see
    `clean_imdb_text`. There is no validation split: hold one out of `"train"` with
    `train_validation_split`, and keep `"test"` for the final score.

    Args:
        split: str, `"train"` or `"test"`.
        data_dir: str, folder holding `{split}.jsonl.gz`, one JSON object
            `{"id", "rating", "label", "text"}` per line: the output of
            `python -m examples.text_classification.download_imdb --output-dir DIR`.
        shuffle: bool, whether to shuffle the reviews. `False` keeps the file order
            (positive reviews by id, then negative reviews by id). Defaults to `True`.
        seed: int, seed of the shuffle (a NumPy `default_rng` permutation). Defaults
            to `0`.

    Returns:
        A tuple `(texts, labels)`: `texts` a list of str, `labels` an int32 NumPy array
        of 0 (negative) / 1 (positive) in the same order.

    Raises:
        DataDirectoryError: (a `ValueError`) if `data_dir` does not exist or holds no
            `{split}.jsonl.gz`.
        DataFormatError: (a `ValueError`) if the file is empty or a line is not a JSON
            object with an int `label` of 0 or 1 and a str `text`; the message names
            the file and line number.
        ValueError: if `split` is not one of `IMDB_SPLITS` or `seed` is not an int.

    Example:

    >>> texts, labels = load_imdb("test", "data/imdb")  # doctest: +SKIP
    >>> len(texts), int(labels.sum())  # doctest: +SKIP
    (25000, 12500)
    """
    if split not in IMDB_SPLITS:
        raise ValueError(f"`split` must be one of {IMDB_SPLITS}. Received: split={split!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"`seed` must be an int. Received: seed={seed!r}")
    if data_dir is None:
        raise DataDirectoryError(
            "`data_dir` is required for IMDB: pass a folder holding 'train.jsonl.gz' and "
            "'test.jsonl.gz', or create one with "
            "`python -m examples.text_classification.download_imdb --output-dir DIR`."
        )
    data_dir = os.fspath(data_dir)
    path = _find_file(
        data_dir,
        (f"{split}.jsonl.gz",),
        "IMDB",
        "Pass the folder `download_imdb` wrote, or create one with "
        "`python -m examples.text_classification.download_imdb --output-dir DIR`.",
    )
    texts = []
    labels = []
    for number, line in enumerate(_split_lines(_read_text(path), path), start=1):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if (
            not isinstance(record, dict)
            or any(key not in record for key in _IMDB_KEYS)
            or type(record["label"]) is not int
            or record["label"] not in (0, 1)
            or not isinstance(record["text"], str)
        ):
            raise DataFormatError(
                f"'{path}' line {number}: expected a JSON object with keys {list(_IMDB_KEYS)}, "
                f"a label of 0 or 1 and a str text, got {_clip(line)}. Restore the file or "
                "re-create it with examples.text_classification.download_imdb."
            )
        texts.append(record["text"])
        labels.append(record["label"])
    labels = np.array(labels, dtype=np.int32)
    if shuffle:
        order = np.random.default_rng(seed).permutation(len(texts))
        texts = [texts[i] for i in order]
        labels = labels[order]
    return texts, labels


def clean_imdb_text(text):
    """Replaces the HTML line breaks of IMDB reviews with spaces.

    IMDB reviews mark paragraph breaks with `<br />` (also written `<br/>` or `<br>`,
    in any case); each one becomes a single space. Nothing else changes. Apply it to
    Python strings before tokenization.

    Args:
        text: str, a review.

    Returns:
        The review as a str, without `<br>` tags.

    Raises:
        TypeError: if `text` is not a str.

    Example:

    >>> clean_imdb_text("Great film.<br /><br />Go and see it.")
    'Great film.  Go and see it.'
    """
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a str. Received: text of type {type(text).__name__}")
    return _BR_TAG.sub(" ", text)


def sst2_sentence_holdout(texts, labels, count=1000, min_words=12, overlap_words=4, seed=0):
    """Holds out long SST-2 training phrases, and removes their overlaps from training.

    SST-2's training set holds every phrase of the treebank's parse trees, so a held-out
    phrase picked at random has its sub-phrases and the sentence around it left in
    training: a validation score on such phrases rises with memorisation (93% where the
    dev set gets 80%) and cannot stop training at the right epoch. Here `count` phrases
    of at least `min_words` words (dev sentences average 19.5) are held out, and every
    training phrase of at least `overlap_words` words that lies inside one of them, or
    contains one, is dropped. Shorter phrases ("a good film") stay: they teach words,
    not the held-out sentences' labels.

    Args:
        texts: list of str, the SST-2 training phrases.
        labels: 1-D array-like of int.
        count: int, phrases to hold out. Defaults to `1000`.
        min_words: int, the shortest phrase held out, in words. Defaults to `12`.
        overlap_words: int, the shortest overlapping phrase dropped. Defaults to `4`.
        seed: int, seed of the choice. Defaults to `0`.

    Returns:
        `((train_texts, train_labels), (validation_texts, validation_labels))`.

    Example:

    >>> texts, labels = load_sst2("train")
    >>> (train_x, _), (val_x, _) = sst2_sentence_holdout(texts, labels)
    >>> len(val_x)
    1000
    """
    labels = np.asarray(labels)
    if len(texts) != len(labels):
        raise ValueError(
            "`texts` and `labels` must have the same length. Received: "
            f"len(texts)={len(texts)}, len(labels)={len(labels)}"
        )
    words = np.array([len(text.split()) for text in texts])
    candidates = np.flatnonzero(words >= min_words)
    if len(candidates) < count:
        raise ValueError(
            f"Only {len(candidates)} phrases have {min_words} words or more; cannot hold out "
            f"{count}. Lower `count` or `min_words`."
        )
    rng = np.random.default_rng(seed)
    held_out = rng.choice(candidates, count, replace=False)
    # Spaces around each phrase make `in` match whole words only.
    padded = [f" {text} " for text in texts]
    held_text = "\n".join(padded[i] for i in held_out)
    overlapping = {i for i in np.flatnonzero(words >= overlap_words) if padded[i] in held_text}
    corpus = "\n".join(padded)
    line_starts = np.cumsum([0] + [len(text) + 1 for text in padded[:-1]])
    for i in held_out:
        start = corpus.find(padded[i])
        while start != -1:
            overlapping.add(int(np.searchsorted(line_starts, start, side="right") - 1))
            start = corpus.find(padded[i], start + 1)
    train = np.array(sorted(set(range(len(texts))) - overlapping - set(held_out.tolist())))
    train = rng.permutation(train)
    return (
        ([texts[i] for i in train], labels[train]),
        ([texts[i] for i in held_out], labels[held_out]),
    )


def train_validation_split(texts, labels, validation_fraction=0.1, seed=0):
    """Holds out a stratified, deterministic validation set.

    From each label value, `round(count * validation_fraction)` examples, picked at
    random, go to the validation set, so both parts keep the label proportions of the
    input. Each part is then shuffled. The result depends only on the inputs and
    `seed`. Use it to tune on part of IMDB's training set; never tune on its test set.

    Args:
        texts: list of str (or any sequence), the examples.
        labels: 1-D array-like of int, one label per example.
        validation_fraction: float in (0, 1), the share held out. Defaults to `0.1`.
        seed: int, seed of the selection and of the shuffles. Defaults to `0`.

    Returns:
        `((train_texts, train_labels), (validation_texts, validation_labels))`, texts as
        lists and labels as NumPy arrays of the input's dtype.

    Raises:
        ValueError: if `texts` and `labels` differ in length, `labels` is not 1-D,
            `validation_fraction` is not in (0, 1), or either part would be empty.

    Example:

    >>> texts = [f"review {i}" for i in range(10)]
    >>> labels = [0, 1] * 5
    >>> (train_x, train_y), (val_x, val_y) = train_validation_split(texts, labels, 0.2)
    >>> len(train_x), len(val_x), sorted(val_y.tolist())
    (8, 2, [0, 1])
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"`labels` must be 1-D. Received: labels with shape {labels.shape}")
    if len(texts) != len(labels):
        raise ValueError(
            "`texts` and `labels` must have the same length. Received: "
            f"len(texts)={len(texts)}, len(labels)={len(labels)}"
        )
    if (
        isinstance(validation_fraction, bool)
        or not isinstance(validation_fraction, (int, float))
        or not 0 < validation_fraction < 1
    ):
        raise ValueError(
            "`validation_fraction` must be a float strictly between 0 and 1. Received: "
            f"validation_fraction={validation_fraction!r}"
        )
    rng = np.random.default_rng(seed)
    train_indices = []
    validation_indices = []
    for value in np.unique(labels):
        indices = rng.permutation(np.flatnonzero(labels == value))
        count = int(round(len(indices) * validation_fraction))
        validation_indices.append(indices[:count])
        train_indices.append(indices[count:])
    train_indices = rng.permutation(np.concatenate(train_indices or [np.zeros(0, int)]))
    validation_indices = rng.permutation(np.concatenate(validation_indices or [np.zeros(0, int)]))
    if not len(train_indices) or not len(validation_indices):
        raise ValueError(
            f"`validation_fraction={validation_fraction}` of {len(labels)} examples leaves "
            f"{len(train_indices)} for training and {len(validation_indices)} for "
            "validation; both must be non-empty. Pass more examples or another fraction."
        )
    train = ([texts[i] for i in train_indices], labels[train_indices])
    validation = ([texts[i] for i in validation_indices], labels[validation_indices])
    return train, validation
