"""Breaks the library on purpose, one property at a time, and lists the tests that fail.

A suite made faster must still catch the bugs it caught. Each break below is a one-line
change to a copy of this checkout (the library's own files; the tests are not touched);
the named test modules then run on the copy, and the break counts as caught when at least
one of them fails.

    python tests/break_on_purpose.py               # every break, one after another
    python tests/break_on_purpose.py causality     # one (names: --list)

It prints each break's failing tests and exits with status 1 if a break went uncaught.
The backend is `KERAS_BACKEND`'s (TensorFlow by default). Not collected by pytest.
"""

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
FAILED = re.compile(r"^FAILED (\S+)", re.MULTILINE)

# name: (what it breaks, file, the line's text, its broken text, test modules to run).
BREAKS = {
    "causality": (
        "the causal mask lets each position see the next one",
        "keras_transformer/ops/masks.py",
        'return ops.less_equal(cols, rows + ops.cast(start_index, "int32"))',
        'return ops.less_equal(cols, rows + 1 + ops.cast(start_index, "int32"))',
        ["tests/reference/test_invariances.py", "tests/models/test_seq2seq_model.py"],
    ),
    "padding_invariance": (
        "a padding mask keeps every key",
        "keras_transformer/ops/masks.py",
        'padding_mask = ops.cast(padding_mask, "bool")\n    return ops.expand_dims',
        'padding_mask = ops.ones_like(ops.cast(padding_mask, "bool"))\n    return ops.expand_dims',
        ["tests/reference/test_invariances.py", "tests/models/test_seq2seq_model.py"],
    ),
    "cached_decoding": (
        "a cached step also attends to the next, still empty, cache slot",
        "keras_transformer/layers/multi_head_attention.py",
        "filled = causal_mask(ops.shape(q)[1], ops.shape(k)[1], cache_update_index)",
        "filled = causal_mask(ops.shape(q)[1], ops.shape(k)[1], cache_update_index + 1)",
        ["tests/reference/test_invariances.py", "tests/generation/test_seq2seq_generate.py"],
    ),
    "mixed_precision": (
        "layer normalisation computes in the 16-bit compute dtype, not float32",
        "keras_transformer/ops/layer_norm.py",
        'features = ops.cast(x, "float32")',
        "features = x",
        ["tests/reference/test_mixed_precision_layers.py", "tests/ops/test_layer_norm.py"],
    ),
    "keras_round_trip": (
        "the blocks' config forgets `norm_first`",
        "keras_transformer/layers/transformer_block_base.py",
        '"norm_first": self.norm_first,',
        "",
        ["tests/layers/test_transformer_blocks.py", "tests/models/test_model_common.py"],
    ),
    "length_penalty": (
        "beam search's GNMT length penalty ignores alpha",
        "keras_transformer/generation/length_penalty.py",
        'return ops.power((5.0 + length) / 6.0, ops.cast(alpha, "float32"))',
        "return ops.power((5.0 + length) / 6.0, 1.0)",
        ["tests/generation/test_beam_search.py", "tests/generation/test_seq2seq_generate.py"],
    ),
    "masked_lm_labels": (
        "masked-LM labels are read one position to the left of the masked token",
        "keras_transformer/text/masking.py",
        "labels = tf.where(used, tf.gather(token_ids, positions, batch_dims=1), pad_id)",
        "labels = tf.where(used, tf.gather(token_ids, tf.maximum(positions - 1, 0), "
        "batch_dims=1), pad_id)",
        ["tests/text/test_masking.py", "tests/models/test_masked_lm.py"],
    ),
    "umask": (
        "the staging directory is made 0700, as `tempfile.mkdtemp` makes it, whatever the umask",
        "keras_transformer/saving/atomic.py",
        "os.mkdir(staging)",
        "os.mkdir(staging, 0o700)",
        ["tests/saving/test_pretrained.py", "tests/saving/test_serving.py"],
    ),
}


def copy_checkout(destination):
    """The checkout's files (no virtual environment, runs or built site) under `destination`."""
    skip = {".git", ".venv", "runs", "site", "__pycache__", ".pytest_cache", ".ruff_cache"}
    shutil.copytree(REPOSITORY, destination, ignore=lambda _, names: skip & set(names))


def apply_break(root, path, text, broken):
    file = root / path
    source = file.read_text(encoding="utf-8")
    if source.count(text) != 1:
        raise SystemExit(f"error: {path} no longer holds the line this break changes: {text!r}")
    file.write_text(source.replace(text, broken), encoding="utf-8")


def run_break(name, workers):
    what, path, text, broken, modules = BREAKS[name]
    with tempfile.TemporaryDirectory(prefix=f"break-{name}-") as folder:
        root = pathlib.Path(folder) / "checkout"
        copy_checkout(root)
        apply_break(root, path, text, broken)
        command = [sys.executable, "-m", "pytest", "-q", "-rf", "--durations=0", *modules]
        if workers:
            command += ["-n", str(workers)]
        started = time.time()
        # The copy comes first on the path: its package, not the installed one, is tested.
        env = {**os.environ, "PYTHONPATH": str(root)}
        result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    # Test ids without the `@group` pytest-xdist's --dist loadgroup appends.
    failed = sorted({re.sub(r"@[^\]]*$", "", name) for name in FAILED.findall(result.stdout)})
    print(f"## {name}: {what}")
    print(f"{path}: {text!r} -> {broken!r}")
    shown = " ".join(["python", "-m", "pytest", *command[3:]])
    print(f"$ {shown}   ({time.time() - started:.0f} s)")
    if result.returncode not in (0, 1):
        print(result.stdout[-3000:] + result.stderr[-3000:])
    print(f"{len(failed)} failing: " + (", ".join(failed) if failed else "none: NOT CAUGHT"))
    print()
    return bool(failed) and result.returncode == 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="breaks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the breaks and exit")
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers")
    args = parser.parse_args(argv)
    if args.workers < 0:
        parser.error(f"--workers must be 0 (one process) or more; got {args.workers}")
    if args.list:
        for name, (what, path, *_) in BREAKS.items():
            print(f"{name:20} {path}: {what}")
        return 0
    unknown = sorted(set(args.names) - set(BREAKS))
    if unknown:
        parser.error(f"unknown break {', '.join(unknown)}; one of: {', '.join(BREAKS)}")
    caught = [run_break(name, args.workers) for name in args.names or BREAKS]
    return 0 if all(caught) else 1


if __name__ == "__main__":
    sys.exit(main())
