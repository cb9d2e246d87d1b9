"""Running a command of the repository in a fresh Python interpreter, as a user would."""

import pathlib
import subprocess
import sys

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]


def run_python(*arguments, env=None, cwd=REPOSITORY, timeout=300, **kwargs):
    """Runs `python *arguments` in a new interpreter and waits for it.

    Args:
        *arguments: what follows `python` on the command line (`"-m", module, ...`, a
            script's path, or `"-c", code`); each is passed through `str`.
        env: the whole environment of the process; `None` for this process's.
        cwd: the folder it runs in; the repository root by default.
        timeout: seconds before `subprocess.TimeoutExpired` is raised.
        **kwargs: further arguments of `subprocess.run`, such as `input`.

    Returns:
        The `subprocess.CompletedProcess`, its stdout and stderr captured as text.
    """
    return subprocess.run(
        [sys.executable, *map(str, arguments)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
