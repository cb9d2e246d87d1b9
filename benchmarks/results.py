"""Appending a benchmark's table to a results file, with the command that made it."""

import datetime
import os
import shlex
import subprocess
import sys


def git_revision(tree=None):
    """The short commit of `tree` (default: this checkout), with `+dirty` if it has changes."""
    tree = tree or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def git(*arguments):
        return subprocess.run(
            ["git", "-C", tree, *arguments], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        revision = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return revision + ("+dirty" if changed else "")


def command_line():
    """The command that is running, as a user would type it again."""
    command = "python " + shlex.join(sys.argv)
    backend = os.environ.get("KERAS_BACKEND")
    return f"KERAS_BACKEND={backend} {command}" if backend else command


def markdown_table(header, rows):
    """A Markdown table; columns whose cells all look numeric are right-aligned."""

    def numeric(cell):
        return cell.replace(",", "").replace(".", "").replace("%", "").lstrip("-").isdigit()

    align = [
        "---:" if all(numeric(row[i]) or row[i] == "—" for row in rows) else "---"
        for i in range(len(header))
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def append_section(path, title, script, backend, found, notes, table):
    """Appends `## title, date` with the command, commit, versions, `notes` and `table`."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    new_file = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a") as f:
        if new_file:
            f.write("# Benchmark results\n")
        f.write(f"\n## {title}, {stamp}\n\n")
        f.write(f"Appended by `{script}`; see its docstring for what is measured.\n\n")
        f.write(f"Command: `{command_line()}` at commit {git_revision()}\n\n")
        f.write(f"- Backend: {backend}; " + ", ".join(f"{k} {v}" for k, v in found.items()) + "\n")
        for note in notes:
            f.write(f"- {note}\n")
        f.write("\n" + table)


def append_run(path, title, script, table, notes, elapsed, load_at_start, packages=None):
    """`append_section` with this process's versions, then the CPU and the run's wall time.

    Args:
        path: the Markdown file.
        title: the heading of the section.
        script: the benchmark's path from the repository root.
        table: the Markdown table.
        notes: lines on what was measured, before the machine's.
        elapsed: the run's wall time, in seconds.
        load_at_start: `machine.load_average()` at the start of the run.
        packages: `{name: version}` of what was measured beyond `machine.versions`' packages.
    """
    from machine import cpu_description, load_note, versions

    backend, found = versions()
    found.update(packages or {})
    notes = [
        *notes,
        f"CPU: {cpu_description()}",
        f"Wall time: {elapsed:.0f} s; {load_note(load_at_start)}",
    ]
    append_section(path, title, script, backend, found, notes, table)
