"""Helpers for the saving tests: the process umask, file modes, a dead process id."""

import contextlib
import hashlib
import os
import stat
import subprocess
import sys


@contextlib.contextmanager
def umask(value):
    """Runs the block under `value` as the process umask, then restores the old one."""
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


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


def tiny_model(dtype=None):
    """A 1 + 1-layer translation model over the tokenizer's 80 ids."""
    from keras_transformer.models import Seq2SeqTransformer

    return Seq2SeqTransformer(
        VOCABULARY_SIZE,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        dtype=dtype,
    )
