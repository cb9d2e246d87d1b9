"""Helpers for the saving tests: the process umask, file modes, a dead process id."""

import contextlib
import hashlib
import os
import stat
import subprocess
import sys

import numpy as np
import pytest


@contextlib.contextmanager
def umask(value):
    """Runs the block under `value` as the process umask, then restores the old one."""
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


# The usual umask and a private one, with the modes a save must then give its folders and files.
UMASK_CASES = pytest.mark.parametrize(
    "mask, directory_mode, file_mode",
    [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)],
    ids=["umask022", "umask077"],
)


def modes(directory):
    """`{relative path: permission bits}` for `directory` and everything under it."""
    paths = [directory, *directory.rglob("*")]
    return {str(path.relative_to(directory)): stat.S_IMODE(path.stat().st_mode) for path in paths}


def assert_modes(directory, directory_mode, file_mode):
    found = modes(directory)
    expected = {
        name: directory_mode if (directory / name).is_dir() else file_mode for name in found
    }
    assert found == expected


def file_hashes(directory):
    """`{relative path: sha256}` of every file under `directory`."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def dead_pid():
    """The id of a process that has ended (and been waited for)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# The small English-German corpus, tokenizer and model the saving tests share.
SENTENCES = [
    "A man rides a bike.",
    "Ein Mann fährt Fahrrad.",
    "Two dogs play in the snow.",
    "Zwei Hunde spielen im Schnee.",
] * 20
VOCABULARY_SIZE = 80


def train_tokenizer(vocabulary_size=VOCABULARY_SIZE):
    from keras_transformer.text import SubwordTokenizer

    return SubwordTokenizer.train(SENTENCES, vocabulary_size=vocabulary_size, byte_fallback=False)


# A batch for `tiny_model`: padding in both inputs.
INPUTS = {
    "encoder_token_ids": np.array([[5, 6, 7, 0], [8, 9, 10, 11]], "int32"),
    "decoder_token_ids": np.array([[2, 12, 13], [2, 14, 0]], "int32"),
}


def tiny_model(**overrides):
    """A 1 + 1-layer translation model over the tokenizer's 80 ids."""
    from tests import tiny_models

    return tiny_models.seq2seq(VOCABULARY_SIZE, **overrides)
