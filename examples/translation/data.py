"""Loader for the Multi30k (Task 1) translation data shipped in this repository."""

import gzip
import os

DEFAULT_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "multi30k")
SPLITS = ("train", "val", "test_2016_flickr")


def _read_lines(path):
    if not os.path.isfile(path):
        directory = os.path.dirname(path)
        available = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        raise ValueError(
            f"Multi30k file not found: '{path}'. Expected files named '{{split}}.{{lang}}.gz' "
            f"in `data_dir`; found {available or 'no such directory'}. Pass a `data_dir` that "
            f"holds the files, or leave it as None to use the copy in {DEFAULT_DATA_DIR}."
        )
    with gzip.open(path, "rt", encoding="utf-8", newline="") as file:
        text = file.read()
    # `str.splitlines` would also break on U+2028, U+0085 and friends; only "\n" ends a
    # sentence in these files, and the raw text is what BLEU is scored against.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_multi30k(split, data_dir=None, source="en", target="de", limit=None):
    """Loads one split of Multi30k as aligned (source, target) sentence pairs.

    The text is returned exactly as stored: cased, untokenized and not normalized,
    so that detokenized model output can be scored against it with sacreBLEU.

    Args:
        split: str, one of `"train"` (29,000 pairs), `"val"` (1,014) or
            `"test_2016_flickr"` (1,000). Any other `{split}.{lang}.gz` pair placed in
            `data_dir` (e.g. `"test_2017_flickr"`) also loads.
        data_dir: str, folder holding `{split}.{lang}.gz` files (UTF-8, one sentence
            per line). Defaults to `None`, the in-repo copy
            `examples/translation/data/multi30k/`.
        source: str, source language code. Defaults to `"en"`.
        target: str, target language code. Defaults to `"de"`.
        limit: int, keep only the first `limit` pairs. Defaults to `None` (all).

    Returns:
        A list of `(source_sentence, target_sentence)` string tuples, in file order.

    Raises:
        ValueError: if a file is missing, the two files have different line counts,
            or `split`, `source`, `target` or `limit` is malformed.

    Example:

    >>> pairs = load_multi30k("train", limit=1)
    >>> pairs[0][0]
    'Two young, White males are outside near many bushes.'
    """
    for name, value in (("split", split), ("source", source), ("target", target)):
        if not isinstance(value, str) or not value or os.sep in value or "." in value:
            raise ValueError(
                f"`{name}` must be a plain name such as {SPLITS[0]!r} or 'en'. "
                f"Received: {name}={value!r}"
            )
    if source == target:
        raise ValueError(
            f"`source` and `target` must be different languages. Received: "
            f"source={source!r}, target={target!r}"
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"`limit` must be None or a non-negative int. Received: limit={limit!r}")
    data_dir = DEFAULT_DATA_DIR if data_dir is None else os.fspath(data_dir)
    source_path = os.path.join(data_dir, f"{split}.{source}.gz")
    target_path = os.path.join(data_dir, f"{split}.{target}.gz")
    source_lines = _read_lines(source_path)
    target_lines = _read_lines(target_path)
    if len(source_lines) != len(target_lines):
        raise ValueError(
            f"Multi30k files are not line-aligned: '{source_path}' has {len(source_lines)} "
            f"lines but '{target_path}' has {len(target_lines)}. Line i of one must be the "
            "translation of line i of the other; restore both files from the same source."
        )
    pairs = list(zip(source_lines, target_lines))
    return pairs if limit is None else pairs[:limit]
