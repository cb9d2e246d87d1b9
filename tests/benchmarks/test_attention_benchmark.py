"""benchmarks/attention.py: the plan, the table it appends, and that its memory figures are real."""

import os
import sys
from pathlib import Path

import pytest

from tests.fresh_python import run_python

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPT = REPOSITORY / "benchmarks" / "attention.py"
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import attention  # noqa: E402


def run_script(*flags, timeout=120):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPOSITORY))
    return run_python(SCRIPT, *flags, env=env, timeout=timeout)


def table_of(markdown):
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return header, [dict(zip(header, row)) for row in rows]


def number(cell):
    return float(cell.replace(",", ""))


def test_score_matrix_bytes_is_four_bytes_per_head_and_pair():
    assert attention.score_matrix_bytes(1, 4, 4096) == 4 * 4 * 4096**2 == 256 * 2**20
    assert attention.score_matrix_bytes(2, 8, 100, itemsize=2) == 2 * 8 * 100**2 * 2


def test_peak_rss_reset_sees_a_known_allocation():
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("no /proc/self/clear_refs on this system")
    assert attention.peak_rss_works()


def test_dry_run_prints_the_plan_and_imports_nothing_heavy():
    done = run_script("--dry-run", "--lengths", "1024,4096", "--contenders", "ours,naive")
    assert done.returncode == 0, done.stderr
    plan = [line for line in done.stdout.splitlines() if "n=" in line]
    assert len(plan) == 4
    assert "score matrix 256.0 MiB" in plan[-1] and "naive" in plan[-1]
    assert "oneDNN" not in done.stderr  # TensorFlow was not imported


def test_bad_flags_are_refused_with_the_flag_named():
    done = run_script("--dry-run", "--contenders", "ours,flash")
    assert done.returncode == 2 and "--contenders" in done.stderr and "flash" in done.stderr
    done = run_script("--dry-run", "--width", "30", "--heads", "4")
    assert done.returncode == 2 and "--width" in done.stderr


def test_quick_run_appends_a_sane_table(tmp_path):
    output = tmp_path / "results.md"
    done = run_script(
        "--lengths", "16,512",
        "--contenders", "ours,keras,naive,ours_remat",
        "--width", "64",
        "--repeats", "1",
        "--output", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    text = output.read_text()
    assert "benchmarks/attention.py" in text and "Command:" in text and "load average" in text
    header, rows = table_of(text)
    assert header == attention.HEADER
    assert [(r["length"], r["contender"]) for r in rows] == [
        (n, c) for n in ("16", "512") for c in ("ours", "keras", "naive", "ours_remat")
    ]
    for row in rows:
        # One float32 (1, 4, n, n) score matrix.
        scores = 16 * int(row["length"]) ** 2 / 2**20
        assert number(row["scores MiB"]) == pytest.approx(scores, abs=0.01)
        if row["path"].startswith("failed"):
            # A contender that fails (RematScope on TensorFlow) is a row, not a crash.
            assert row["contender"] == "ours_remat", row
            continue
        assert number(row["ms fwd+bwd"]) > 0
        if row["contender"] == "ours":
            assert row["this / ours"] == "1.00"
    measured = {
        (r["contender"], r["length"]): r for r in rows if not r["path"].startswith("failed")
    }
    for contender in ("ours", "keras", "naive"):
        long = measured[(contender, "512")]
        # Every CPU path keeps at least one (batch, heads, n, n) matrix for the backward pass.
        assert number(long["peak MiB"]) >= number(long["scores MiB"]), long
        assert number(long["peak MiB"]) > number(measured[(contender, "16")]["peak MiB"])
