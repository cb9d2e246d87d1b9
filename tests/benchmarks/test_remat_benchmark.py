"""benchmarks/remat.py: flags, the plan, and the table of a tiny run."""

import re
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

import remat  # noqa: E402


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--lengths", "1k"], "--lengths must be integers"),
        (["--lengths", "0"], "--lengths must be positive"),
        (["--variants", "plain,checkpoint"], "unknown \\['checkpoint'\\]"),
        (["--layers", "0"], "--layers must be positive"),
    ],
)
def test_bad_flags_are_refused(flags, message, capsys):
    with pytest.raises(SystemExit):
        remat.parse_args(flags)
    assert re.search(message, capsys.readouterr().err)


def test_dry_run_prints_the_plan(capsys):
    flags = ["--dry-run", "--lengths", "64,128", "--variants", "plain,rematerialize"]
    assert remat.main(flags) is None
    out = capsys.readouterr().out
    assert "plain@64, rematerialize@64, plain@128, rematerialize@128" in out


def test_rows_give_ratios_to_the_plain_stack_and_failures():
    args = remat.parse_args(["--lengths", "64", "--variants", "plain,rematerialize,RematScope"])
    mib = 2**20
    results = {
        ("plain", 64): {"peak": 200 * mib, "temp": None, "ms": 10.0},
        ("rematerialize", 64): {"peak": 150 * mib, "temp": None, "ms": 13.0},
        ("RematScope", 64): {"error": "ValueError: refused"},
    }
    rows = remat.rows_of(results, args)
    assert rows[0] == ["64", "plain", "200", "1.00", "—", "—", "10", "1.00"]
    assert rows[1] == ["64", "rematerialize", "150", "0.75", "—", "—", "13", "1.30"]
    assert rows[2][:3] == ["64", "RematScope", "fails: ValueError: refused"]
