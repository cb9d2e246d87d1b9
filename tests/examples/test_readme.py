"""The README is true to the code: its snippets run, its figures are the recorded ones.

Every fenced block of README.md is either run here, in a folder laid out as after the
README's commands (`runs/multi30k-quick` and `runs/sst2-quick` hold the small runs of
`conftest.py`), or named below with the reason it cannot run in a test.
"""

import importlib
import os
import pathlib
import re
import shlex

import pytest

from tests.fresh_python import run_python

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
README = (REPOSITORY / "README.md").read_text(encoding="utf-8")
# Every example's RESULTS.md and the benchmarks'.
RESULTS = sorted((REPOSITORY / "examples").glob("*/RESULTS.md")) + [
    REPOSITORY / "benchmarks" / "RESULTS.md"
]
# Blocks that cannot run here, found by a line they hold, and why (none at present).
NOT_RUN = {}
# Commands whose README lines run in this process (through their `main`), each with the test
# that runs the command in a fresh process as a user does: a new interpreter costs seconds.
RUN_IN_THIS_PROCESS = {
    "examples.text_classification.predict": "test_text_classification_example.py::"
    "test_predict_command_reads_arguments_files_and_stdin",
}
# Decimal numbers in the README that are not results: the arXiv id, Python's version, the
# beam search's length penalty setting.
NOT_FIGURES = {"1706.03762", "3.11", "0.6"}


def command_lines(code):
    """The lines of a shell block, each `\\`-continued command joined into one line."""
    return re.sub(r"\\\n\s*", "", code).splitlines()


def blocks():
    """`(language, code, first line number)` of every fenced block."""
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", README, re.MULTILINE | re.DOTALL):
        line = README.count("\n", 0, match.start()) + 1
        found.append((match.group(1), match.group(2), line))
    return found


def block_id(block):
    return f"line{block[2]}-{block[0] or 'text'}"


def reason_not_run(code):
    for marker, reason in NOT_RUN.items():
        if marker in code:
            return reason
    return None


@pytest.fixture(scope="module")
def readme_folder(tmp_path_factory, translation_quick_run, classification_quick_run):
    """A working folder with the `runs/` the README's snippets read."""
    folder = tmp_path_factory.mktemp("readme")
    runs = folder / "runs"
    runs.mkdir()
    (runs / "multi30k-quick").symlink_to(translation_quick_run[0])
    (runs / "sst2-quick").symlink_to(classification_quick_run[0])
    return folder


def test_every_block_is_run_or_named():
    kinds = {(language, reason_not_run(code) is None) for language, code, _ in blocks()}
    assert kinds <= {
        ("bash", True),
        ("bash", False),
        ("python", True),
        ("python", False),
        ("", True),
    }
    assert sum(reason_not_run(code) is not None for _, code, _ in blocks()) == len(NOT_RUN)


def test_quick_start_commands_are_the_main_job_and_ci():
    language, code, _ = blocks()[0]
    commands = [line for line in command_lines(code) if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("&& python -m examples.translation.train --quick")
    ci = (REPOSITORY / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run picks the interpreter (`$PYTHON -m venv .venv`); the rest is the same line,
    # which it runs step by step.
    assert commands[1].startswith("python3.11 -m venv .venv && ")
    tail = commands[1].removeprefix("python3.11")
    assert [line for line in ci.splitlines() if line.endswith(f"{tail}'")] == [
        f"COMMAND='$PYTHON{tail}'"
    ]
    assert "'" not in tail


@pytest.mark.parametrize(
    "block",
    [b for b in blocks() if b[0] == "python" and reason_not_run(b[1]) is None],
    ids=block_id,
)
def test_python_snippet_runs(block, readme_folder, monkeypatch):
    monkeypatch.chdir(readme_folder)
    namespace = {"__name__": "readme_snippet"}
    exec(compile(block[1], f"README.md:{block[2]}", "exec"), namespace)


@pytest.mark.parametrize(
    "block",
    [b for b in blocks()[1:] if b[0] == "bash" and reason_not_run(b[1]) is None],
    ids=block_id,
)
def test_shell_snippet_runs(block, readme_folder, monkeypatch, capsys):
    commands = [line for line in command_lines(block[1]) if line.startswith("python -m examples.")]
    assert commands, block
    for command in commands:
        arguments = shlex.split(command, comments=True)  # python -m MODULE ARGS...
        if arguments[2] in RUN_IN_THIS_PROCESS:
            monkeypatch.chdir(readme_folder)
            capsys.readouterr()
            importlib.import_module(arguments[2]).main(arguments[3:])
            assert capsys.readouterr().out.strip(), command
            continue
        result = run_python(
            *arguments[1:], cwd=readme_folder, env={**os.environ, "PYTHONPATH": str(REPOSITORY)}
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip(), command


def test_every_figure_is_a_recorded_one():
    recorded = "\n".join(path.read_text(encoding="utf-8") for path in RESULTS)
    prose = re.sub(r"^```.*?^```", "", README, flags=re.MULTILINE | re.DOTALL)
    figures = set(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", prose)) - NOT_FIGURES
    missing = sorted(
        f for f in figures if not re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", recorded)
    )
    assert not missing, f"README figures found in no RESULTS.md: {missing}"
    assert len(figures) >= 10  # the headline scores and times of the examples and benchmarks
