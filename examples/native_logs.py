"""Keeps TensorFlow's C++ log lines off a command-line tool's terminal.

TensorFlow 2.21 logs through absl before any Python code can configure it: importing it
prints oneDNN and CUDA-probing lines, and the first device query prints `E0000 ... failed
call to cuInit` on every CPU machine. `TF_CPP_MIN_LOG_LEVEL` no longer reaches those
lines, and they are written by C++ straight to file descriptor 2, so the only place to
drop them is the descriptor itself: `hide_native_logs` points it at a pipe and forwards
every line that is not a native log line to the real standard error. Python's warnings
and tracebacks therefore still appear, in order.
"""

import atexit
import os
import re
import sys
import threading

# absl's prefix ("I0000 00:00:1796099858.160344    4837 port.cc:153] ...", severity
# I/W/E; F, a fatal error, always passes), absl's notice that precedes the first such line,
# the continuation line of the CPU-feature notice, and SentencePiece's own logger.
NATIVE_LOG_LINE = re.compile(
    rb"^(?:[IWE]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w./-]+:\d+\] "
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|To enable the following instructions: .*rebuild TensorFlow"
    rb"|[\w./-]+\.cc\(\d+\) LOG\(INFO\) )"
)


def is_native_log_line(line):
    """Whether a line written to standard error (bytes) is TensorFlow/absl log noise."""
    return NATIVE_LOG_LINE.match(line) is not None


def hide_native_logs():
    """Filters native log lines out of this process's standard error until it exits.

    Call it before TensorFlow is imported. Does nothing when standard error has no file
    descriptor (e.g. under a test runner that replaced it).
    """
    try:
        sys.stderr.flush()
        target = os.dup(2)
    except (OSError, ValueError, AttributeError):
        return
    reader, writer = os.pipe()
    os.dup2(writer, 2)
    os.close(writer)

    def forward():
        with os.fdopen(reader, "rb") as pipe:
            for line in pipe:
                if not is_native_log_line(line):
                    os.write(target, line)

    thread = threading.Thread(target=forward, name="native-log-filter", daemon=True)
    thread.start()

    def restore():
        # Closing our end of the pipe ends the forwarder after it drained what was written.
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(target, 2)
        thread.join(timeout=5)

    atexit.register(restore)
