"""Per-module test time from pytest's `--durations=0` lists, as docs/guides/testing.md shows it.

    PYTEST_ADDOPTS=--durations=0 CI=true bash .ci/run > ci.log 2>&1
    python tests/durations_table.py ci.log

`PYTEST_ADDOPTS` adds the option to each of the command's pytest runs without changing the
command; each run then lists the setup, call and teardown time of every test (those under
5 ms are left out). This script sums them per test module, one column per run in the order
they ran (`--names` names them), slowest modules first. With `-n 2` two modules run at a
time, so a run's wall time is about half its column's total. Not collected by pytest.
"""

import argparse
import collections
import re
import sys

STAGES = ["TensorFlow", "JAX", "PyTorch", "JAX 8 devices", "TensorFlow 2 devices"]
HEADER = re.compile(r"^=+ slowest durations =+$")
ENTRY = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S+?)::(\S.*)$")
END = re.compile(r"^=+ .*(passed|failed|error).* =+$|^\(\d+ durations < ")


def read_runs(lines):
    """`[{module: (seconds, tests)}, ...]`, one per durations list in the log."""
    runs = []
    inside = False
    for line in lines:
        line = line.rstrip("\n")
        if HEADER.match(line):
            runs.append((collections.defaultdict(float), collections.defaultdict(set)))
            inside = True
        elif inside and END.match(line):
            inside = False
        elif inside and (entry := ENTRY.match(line)):
            seconds, _, module, test = entry.groups()
            runs[-1][0][module] += float(seconds)
            runs[-1][1][module].add(test)
    return [{m: (seconds[m], len(tests[m])) for m in seconds} for seconds, tests in runs]


def table(runs, names, rows=None):
    modules = sorted(
        {module for run in runs for module in run},
        key=lambda module: -max(run.get(module, (0, 0))[0] for run in runs),
    )
    lines = [
        "| module | " + " | ".join(f"{name}: s (tests)" for name in names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]

    def cell(entries):
        seconds = sum(s for s, _ in entries)
        count = sum(c for _, c in entries)
        return f"{seconds:.1f} ({count})" if count else ""

    for module in modules[:rows]:
        cells = [cell([run[module]] if module in run else []) for run in runs]
        lines.append(f"| `{module}` | " + " | ".join(cells) + " |")
    if rows is not None and len(modules) > rows:
        rest = [cell([run[m] for m in modules[rows:] if m in run]) for run in runs]
        lines.append(f"| {len(modules) - rows} other modules | " + " | ".join(rest) + " |")
    totals = [cell(list(run.values())) for run in runs]
    lines.append("| **total** | " + " | ".join(totals) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="the output of the test command with --durations=0")
    parser.add_argument("--names", default=",".join(STAGES), help="the runs' names, in order")
    parser.add_argument("--rows", type=int, default=None, help="the slowest N modules only")
    args = parser.parse_args(argv)
    try:
        with open(args.log, encoding="utf-8", errors="replace") as file:
            runs = read_runs(file)
    except OSError as error:
        parser.error(f"cannot read {args.log}: {error.strerror}")
    if not runs:
        parser.error(f"{args.log} holds no durations list: run pytest with --durations=0")
    names = args.names.split(",")[: len(runs)]
    names += [f"run {i + 1}" for i in range(len(names), len(runs))]
    print(table(runs, names, args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
