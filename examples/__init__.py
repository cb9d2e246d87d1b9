"""Runnable examples built on `keras_transformer`."""

import sys

# Run as a command (`python -m examples...`), whose packages are imported while
# `sys.argv[0]` is still "-m": hide TensorFlow's C++ start-up lines before anything imports
# TensorFlow. Imported by a test or by your code, nothing changes. `--verbose` shows them.
if sys.argv[:1] == ["-m"] and "--verbose" not in sys.argv:
    from examples.native_logs import hide_native_logs

    hide_native_logs()
