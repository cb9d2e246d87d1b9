"""What the throughput benchmarks' commands share: flags, the backend, the closing report."""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def new_parser(docstring, contenders, jit_help):
    """A parser with the flags both benchmarks take.

    Its description is the docstring's first paragraph, which `--help` shows as
    written. The flags: `--rounds`, `--jit` (`both`, `on` or `off`; left out, the
    benchmark's default, which `jit_help` says), `--contenders` (a subset of
    `contenders`), `--backend`, `--output` and `--quick`.
    """
    parser = argparse.ArgumentParser(
        description=docstring.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds (median is reported)")
    parser.add_argument("--jit", choices=("both", "on", "off"), default=None, help=jit_help)
    parser.add_argument(
        "--contenders", default=",".join(contenders), help=f"subset of {','.join(contenders)}"
    )
    parser.add_argument(
        "--backend",
        default=None,
        help="Keras backend; sets KERAS_BACKEND before Keras is imported (default: the "
        "KERAS_BACKEND environment variable, else tensorflow)",
    )
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "RESULTS.md"),
        help="Markdown file to append the results to ('' to skip)",
    )
    parser.add_argument("--quick", action="store_true", help="small shapes, for a smoke test")
    return parser


def parse_shared(parser, argv, contenders, full_shape, quick_shape, counts):
    """Adds a flag per size, parses `argv`, and resolves the sizes, counts and contenders.

    Args:
        parser: the parser from `new_parser`, with the benchmark's own flags;
            its count flags (as `counts` names them, `--rounds` among them)
            default to `None`.
        argv: the arguments, or `None` for the command line's.
        contenders: every contender the benchmark knows.
        full_shape: the default sizes, a dict; each key becomes an integer
            flag (`--new-tokens` for `new_tokens`).
        quick_shape: the sizes with `--quick`, a dict with the same keys.
        counts: `{name: (default, default with --quick)}` for the count flags
            (timed calls, rounds, ...); each must be at least 1.

    Returns:
        The parsed flags; `args.shape` holds the `--quick` or full sizes with
        those given as flags in their place, each count flag left out its
        default, and `args.contenders` the chosen contenders as a list.
    """
    for key, value in full_shape.items():
        flag = "--" + key.replace("_", "-")
        parser.add_argument(flag, dest=key, type=int, default=None, help=f"default {value}")
    args = parser.parse_args(argv)
    shape = dict(quick_shape if args.quick else full_shape)
    for key in shape:
        if getattr(args, key) is not None:
            shape[key] = getattr(args, key)
    args.shape = shape
    for name, (default, quick_default) in counts.items():
        if getattr(args, name) is None:
            setattr(args, name, quick_default if args.quick else default)
    if min(getattr(args, name) for name in counts) < 1:
        flags = [f"--{name}" for name in counts]
        listed = ", ".join(flags[:-1]) + " and " + flags[-1] if len(flags) > 1 else flags[0]
        parser.error(f"{listed} must be at least 1")
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = set(args.contenders) - set(contenders)
    if unknown:
        parser.error(f"unknown contenders {sorted(unknown)}; choose from {contenders}")
    return args


def set_backend(args):
    """`--backend` into KERAS_BACKEND, and the repository onto the import path.

    Call before Keras (or the package) is first imported.
    """
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, os.path.dirname(HERE))
    sys.path.insert(0, HERE)


def report(args, title, script, versions, table, summary, started, load_at_start, remark=""):
    """Prints the table, the summary and the run's time, and appends them to `--output`.

    Args:
        args: the parsed flags (`output`: the Markdown file, `''` to skip).
        title: the heading of the appended section.
        script: the benchmark's path from the repository root.
        versions: `(backend, found)` as `machine.versions` returns them.
        table: the Markdown table.
        summary: what the table shows, one paragraph.
        started: `time.perf_counter()` at the start of the run.
        load_at_start: `machine.load_average()` at the start of the run.
        remark: appended to the note on the machine's load. Defaults to `""`.
    """
    from machine import cpu_description, load_note
    from results import append_section

    elapsed = time.perf_counter() - started
    load = load_note(load_at_start) + remark
    print()
    print(table)
    print(summary)
    print(f"wall time {elapsed:.0f} s; {load}")
    if args.output:
        backend, found = versions
        append_section(
            args.output,
            title,
            script,
            backend,
            found,
            [f"CPU: {cpu_description()}", summary, f"Wall time: {elapsed:.0f} s; {load}"],
            table,
        )
        print(f"appended to {args.output}")
