"""Download the IMDB Large Movie Review Dataset and write it as `{train,test}.jsonl.gz`.

Fetches Stanford's `aclImdb_v1.tar.gz` (84,125,825 bytes), checks its SHA-256, and
writes the layout `examples.text_classification.data.load_imdb` reads:

- `train.jsonl.gz` and `test.jsonl.gz`: one JSON object per line,
  `{"id": int, "rating": int, "label": 1|0, "text": str}`, `label` 1 for `pos/`
  (rating 7-10) and 0 for `neg/` (rating 1-4), `id` and `rating` from the file name
  `{id}_{rating}.txt`, the text unchanged. All positive reviews by id come first, then
  all negative reviews by id. The gzip files are deterministic (level 9, mtime 0).
- `aclImdb_README.txt`: the data set's README, when the tarball has one.

`unsup/` (50,000 unlabeled reviews), the `.feat` bag-of-words files and the vocabulary
are skipped. The files are written to a temporary folder next to `--output-dir` and
moved into place only once complete, so a failed run leaves an existing output intact.

Run:
    python -m examples.text_classification.download_imdb --output-dir data/imdb
"""

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import traceback
import urllib.error
import urllib.request
import zlib

DEFAULT_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
# As recorded in TensorFlow Datasets' `imdb_reviews/checksums.tsv` (84,125,825 bytes).
DEFAULT_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
SPLITS = ("train", "test")
README_NAME = "aclImdb_README.txt"

_REVIEW = re.compile(r"^(?:\./)?aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")
_README = re.compile(r"^(?:\./)?aclImdb/README$")
_CHUNK = 1 << 20
_TIMEOUT_S = 60


class DownloadError(Exception):
    """An expected failure: unreachable URL, checksum mismatch or unusable tarball."""


def _sha256_hex(text):
    value = text.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise argparse.ArgumentTypeError(f"expected 64 hexadecimal digits, got {text!r}")
    return value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output-dir",
        required=True,
        help="folder to write train.jsonl.gz and test.jsonl.gz to (created if missing; "
        "files of the same names are replaced)",
    )
    parser.add_argument("--url", default=DEFAULT_URL, help="tarball URL (default: %(default)s)")
    parser.add_argument(
        "--sha256",
        type=_sha256_hex,
        default=DEFAULT_SHA256,
        help="expected SHA-256 of the tarball (default: the published aclImdb_v1.tar.gz sum)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    args = parser.parse_args(argv)
    output_dir = os.path.abspath(args.output_dir)
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        parser.error(f"--output-dir '{output_dir}' exists and is not a directory")
    args.output_dir = output_dir
    return args


def _megabytes(count):
    return f"{count / 1e6:.1f} MB"


def download(url, path, sha256):
    """Downloads `url` to `path` and checks its SHA-256; returns the number of bytes."""
    digest = hashlib.sha256()
    received = 0
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            print(f"Downloading {url}" + (f" ({_megabytes(total)})" if total else ""))
            next_report = 0.25
            with open(path, "wb") as file:
                while chunk := response.read(_CHUNK):
                    file.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    if total and received < total and received >= next_report * total:
                        print(f"  {_megabytes(received)} of {_megabytes(total)}", flush=True)
                        next_report += 0.25
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise DownloadError(f"cannot download {url}: {reason}") from error
    print(f"  {_megabytes(received)} received")
    if digest.hexdigest() != sha256:
        raise DownloadError(
            f"SHA-256 mismatch for {url}: expected {sha256}, got {digest.hexdigest()} "
            f"({received} bytes); the download is corrupt or not aclImdb_v1.tar.gz "
            "(pass --sha256 only for a copy you trust)"
        )
    return received


def read_reviews(tarball_path):
    """Reads the labeled reviews of an aclImdb tarball.

    Returns:
        `(records, readme)`: `records` maps each split to its list of
        `{"id", "rating", "label", "text"}` dicts in the shared order (pos by id, then
        neg by id); `readme` is the README's bytes, or `None`.
    """
    found = {(split, polarity): {} for split in SPLITS for polarity in ("pos", "neg")}
    readme = None
    try:
        with tarfile.open(tarball_path, "r:gz") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                if _README.match(member.name):
                    readme = tar.extractfile(member).read()
                    continue
                match = _REVIEW.match(member.name)
                if match is None:  # unsup/, *.feat, imdb.vocab, urls_*.txt, ...
                    continue
                split, polarity, review_id, rating = match.groups()
                review_id, rating = int(review_id), int(rating)
                if not (7 <= rating <= 10 if polarity == "pos" else 1 <= rating <= 4):
                    raise DownloadError(
                        f"'{member.name}' has rating {rating}, not valid for a {polarity} review"
                    )
                reviews = found[split, polarity]
                if review_id in reviews:
                    raise DownloadError(f"two {split}/{polarity} reviews have id {review_id}")
                data = tar.extractfile(member).read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise DownloadError(f"'{member.name}' is not valid UTF-8") from error
                reviews[review_id] = (rating, text)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise DownloadError(f"'{tarball_path}' is not a readable .tar.gz: {error}") from error
    empty = [f"aclImdb/{split}/{polarity}/" for (split, polarity), r in found.items() if not r]
    if empty:
        raise DownloadError(f"the tarball has no reviews in {', '.join(empty)}")
    records = {}
    for split in SPLITS:
        records[split] = [
            {"id": review_id, "rating": rating, "label": label, "text": text}
            for polarity, label in (("pos", 1), ("neg", 0))
            for review_id, (rating, text) in sorted(found[split, polarity].items())
        ]
    return records, readme


def write_jsonl_gz(path, records):
    """Writes `records` as deterministic gzipped JSON lines (level 9, mtime 0)."""
    text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as file,
    ):
        file.write(text.encode("utf-8"))


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build(output_dir, url=DEFAULT_URL, sha256=DEFAULT_SHA256):
    """Downloads, checks and converts the tarball; writes `output_dir` atomically."""
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".imdb-download-", dir=parent)
    try:
        tarball = os.path.join(staging, "aclImdb_v1.tar.gz")
        download(url, tarball, sha256)
        records, readme = read_reviews(tarball)
        os.remove(tarball)
        names = []
        for split in SPLITS:
            name = f"{split}.jsonl.gz"
            write_jsonl_gz(os.path.join(staging, name), records[split])
            names.append(name)
            counts = [sum(r["label"] == label for r in records[split]) for label in (1, 0)]
            print(f"  {split}: {len(records[split])} reviews ({counts[0]} pos, {counts[1]} neg)")
        if readme is not None:
            with open(os.path.join(staging, README_NAME), "wb") as file:
                file.write(readme)
            names.append(README_NAME)
        for name in names:
            os.chmod(os.path.join(staging, name), 0o644)
        if os.path.isdir(output_dir):
            for name in names:  # each replacement is atomic; other files stay
                os.replace(os.path.join(staging, name), os.path.join(output_dir, name))
        else:
            os.chmod(staging, 0o755)
            os.rename(staging, output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for name in names:
        if name.endswith(".gz"):
            print(f"{_file_sha256(os.path.join(output_dir, name))}  {name}")
    print(f"Wrote {', '.join(names)} to {output_dir}")


def main(argv=None):
    args = parse_args(argv)
    try:
        build(args.output_dir, url=args.url, sha256=args.sha256)
    except (DownloadError, OSError) as error:
        if args.debug:
            traceback.print_exc()
        message = " ".join(str(error).split())
        print(f"error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
