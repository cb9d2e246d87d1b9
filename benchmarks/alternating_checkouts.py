"""A benchmark run alternately in this checkout and another: is a change faster or slower?

`training.py` and `generation.py` measure our layers against keras-hub's in one process, round
by round, and report the median of the rounds' ratios. This script runs one of them several
times in each of two checkouts (this one, "after", and ``--baseline DIR``, "before", e.g. a
`git worktree` of the commit before a change), alternating ``before, after, after, before,
...`` so that a change in the machine's load hits both alike, and compares the in-process
ratios: each run's ratio against keras-hub divides out how fast the machine was during that
run. For every row and ratio column of the benchmark's table it prints the runs' ratios, their
median per checkout, and after / before (> 1: the change made ours faster relative to
keras-hub).

Run from the repository root::

    git worktree add /tmp/before 8adf089
    python benchmarks/alternating_checkouts.py --baseline /tmp/before --runs 3 -- \\
        benchmarks/training.py --precisions mixed_bfloat16 --jit off \\
        --contenders ours,keras_hub --steps 8 --rounds 5

It appends the comparison to ``--output`` (default ``benchmarks/RESULTS.md``; ``''`` prints
only). Both checkouts' scripts are run as ``python SCRIPT ARGS --output FILE``; only the last
table of ``FILE`` is read.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# A ratio cell: "1.054 (1.026-1.061)", the median and the lowest and highest round.
RATIO = re.compile(r"^(\d+\.\d+) \(\d+\.\d+-\d+\.\d+\)$")
NUMBER = re.compile(r"^[\d,.]+$")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="After `--`: the benchmark script, relative to the repository root, and its flags.",
    )
    parser.add_argument("--baseline", required=True, help="checkout of the commit to compare with")
    parser.add_argument("--runs", type=int, default=3, help="runs in each checkout (default 3)")
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "RESULTS.md"),
        help="Markdown file the comparison is appended to ('' to print only)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not command[0].endswith(".py"):
        parser.error("give the benchmark after `--`, e.g. `-- benchmarks/training.py --quick`")
    if "--output" in command:
        parser.error("leave `--output` out of the benchmark's flags: each run writes its own")
    if args.runs < 1:
        parser.error(f"--runs must be at least 1; got {args.runs}")
    for tree in (ROOT, args.baseline):
        if not os.path.isfile(os.path.join(tree, command[0])):
            parser.error(f"{command[0]!r} is not a file of the checkout {tree!r}")
    args.command = command
    return args


def last_table(markdown):
    """`(header, rows)` of the last Markdown table in `markdown`, cells stripped."""
    tables, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    if not tables:
        raise ValueError("the benchmark wrote no Markdown table")
    header, _, *rows = tables[-1]
    return header, rows


def ratios_of(markdown):
    """`{(row key, column): median ratio}` for every ratio cell of the last table; a row's key
    is its cells up to the last one before its first ratio that is not a number (the batch
    size, precision, XLA setting and contender, whichever the table has)."""
    header, rows = last_table(markdown)
    found = {}
    for row in rows:
        first_ratio = next((i for i, cell in enumerate(row) if RATIO.match(cell)), len(row))
        words = [i for i, cell in enumerate(row[:first_ratio]) if not NUMBER.match(cell)]
        key = " / ".join(row[: words[-1] + 1]) if words else ""
        for column, cell in zip(header, row):
            match = RATIO.match(cell)
            if match:
                found[(key, column)] = float(match.group(1))
    return found


def environment(tree):
    # The checkout's own package first, ahead of an installed (or editable) one.
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))
    )


def check_imports_its_own_package(tree):
    found = subprocess.run(
        [sys.executable, "-c", "import keras_transformer; print(keras_transformer.__file__)"],
        cwd=tree,
        env=environment(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    expected = os.path.join(os.path.realpath(tree), "keras_transformer", "__init__.py")
    if os.path.realpath(found) != expected:
        raise SystemExit(f"error: {tree} imports keras_transformer from {found}, not its own")


def run_once(tree, command, output):
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *command, "--output", output], cwd=tree, check=True, env=environment(tree)
    )
    return time.perf_counter() - started


def benchmark_backend(command):
    """The `--backend` the benchmark's flags name (`--backend jax` or `--backend=jax`), or None."""
    for i, flag in enumerate(command):
        if flag == "--backend" and i + 1 < len(command):
            return command[i + 1]
        if flag.startswith("--backend="):
            return flag.partition("=")[2]
    return None


def main(argv=None):
    args = parse_args(argv)
    from machine import cpu_description, load_average, load_note, versions
    from results import append_section, git_revision, markdown_table

    trees = {"before": args.baseline, "after": ROOT}
    # before, after, after, before, before, after, ...: each checkout goes first as often.
    order = [name for i in range(args.runs) for name in (("before", "after")[:: 1 - 2 * (i % 2)])]
    runs = {"before": [], "after": []}
    for tree in trees.values():
        check_imports_its_own_package(tree)
    load_at_start = load_average()
    with tempfile.TemporaryDirectory() as scratch:
        for index, name in enumerate(order):
            output = os.path.join(scratch, f"{index}.md")
            seconds = run_once(trees[name], args.command, output)
            with open(output, encoding="utf-8") as file:
                runs[name].append(ratios_of(file.read()))
            print(f"run {index + 1}/{len(order)}: {name}, {seconds:.0f} s", flush=True)
    keys = [key for key in runs["after"][0] if all(key in run for run in runs["before"])]
    table = []
    for row, column in keys:
        medians = {}
        cells = []
        for name in ("before", "after"):
            values = [run[(row, column)] for run in runs[name]]
            medians[name] = statistics.median(values)
            cells.append(f"{', '.join(f'{v:.3f}' for v in values)} ({medians[name]:.3f})")
        table.append([row, column, *cells, f"{medians['after'] / medians['before']:.3f}"])
    revisions = {name: git_revision(tree) for name, tree in trees.items()}
    text = markdown_table(
        [
            "row",
            "ratio",
            f"before ({revisions['before']}): runs (median)",
            f"after ({revisions['after']}): runs (median)",
            "after / before",
        ],
        table,
    )
    notes = [
        f"Benchmark: `python {' '.join(args.command)}`, {args.runs} runs in each checkout, "
        "alternately; each run's ratios are its own, measured against keras-hub in the same "
        "process (after / before > 1: the change made ours faster)",
        f"CPU: {cpu_description()}",
        load_note(load_at_start),
    ]
    print("\n".join(notes) + "\n\n" + text)
    if args.output:
        # The versions of the backend the benchmark ran on, not this process's default.
        backend = benchmark_backend(args.command)
        if backend:
            os.environ["KERAS_BACKEND"] = backend
        backend, found = versions()
        append_section(
            args.output,
            f"Before and after a change: {os.path.basename(args.command[0])}",
            "benchmarks/alternating_checkouts.py",
            backend,
            found,
            notes,
            text,
        )


if __name__ == "__main__":
    main()
