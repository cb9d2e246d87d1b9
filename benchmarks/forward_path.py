"""Which of the package's files and functions one forward call passes through.

Records every Python function of `keras_transformer` entered (``sys.setprofile``)
while running, eagerly on TensorFlow:

* ``encoder-block``: one call of a built `TransformerEncoderBlock` (post-norm, with a
  padding mask), as a user stacks it;
* ``decoding-step``: one cached step of a built `TransformerLM`, `decode_step` with one
  new token against its static cache, as `generate` runs it every step.

It prints, per call, the files and functions in the order first entered, and the counts.
Run it before and after a restructuring of the layers to compare:

    python benchmarks/forward_path.py            # both calls
    python benchmarks/forward_path.py --quiet    # the counts only
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
PACKAGE = os.path.join(ROOT, "keras_transformer") + os.sep


def trace(fn):
    """`[(relative file, function)]` of the package's functions `fn()` enters, in order."""
    entered = []

    def profile(frame, event, arg):
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if filename.startswith(PACKAGE):
            key = (os.path.relpath(filename, ROOT), frame.f_code.co_qualname)
            if key not in entered:
                entered.append(key)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return entered


def encoder_block_call():
    import keras

    from keras_transformer.layers import TransformerEncoderBlock

    block = TransformerEncoderBlock(num_heads=4, intermediate_dim=64)
    x = keras.random.normal((2, 6, 32))
    mask = keras.ops.array([[True] * 6, [True] * 4 + [False] * 2])
    block(x, padding_mask=mask)  # builds
    return lambda: block(x, padding_mask=mask)


def decoding_step_call():
    import keras

    from keras_transformer.models import TransformerLM

    model = TransformerLM(
        vocabulary_size=50, max_sequence_length=16, num_layers=2, hidden_dim=32, num_heads=4,
        intermediate_dim=64,
    )  # fmt: skip
    tokens = keras.ops.ones((2, 1), dtype="int32")
    model(keras.ops.ones((2, 4), dtype="int32"))
    cache = model.initial_cache(2, 16)
    model.decode_step(tokens, cache, 0)
    return lambda: model.decode_step(tokens, cache, 3)


CALLS = {"encoder-block": encoder_block_call, "decoding-step": decoding_step_call}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    parser.add_argument(
        "--calls", default=",".join(CALLS), help="comma-separated: " + ", ".join(CALLS)
    )
    args = parser.parse_args(argv)
    for name in args.calls.split(","):
        if name not in CALLS:
            parser.error(f"unknown call {name!r}; choose from {', '.join(CALLS)}")
        entered = trace(CALLS[name]())
        files = list(dict.fromkeys(path for path, _ in entered))
        print(f"{name}: {len(files)} files, {len(entered)} functions")
        if not args.quiet:
            for path in files:
                functions = [function for p, function in entered if p == path]
                print(f"  {path}: {', '.join(functions)}")


if __name__ == "__main__":
    main()
