"""docs/reliability.md names tests that exist: every `file::test[case]` it cites is found."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
# `file.py::name`, `file.py::name[case]`, and `::name` / `[case]` continuing the last file.
CITATION = re.compile(r"(?:([\w/]+\.py))?::(\w+)((?:\[[\w-]+\](?:, )?)*)")


def citations():
    found, current = [], None
    for row in (line for line in DOC.splitlines() if line.startswith("| ")):
        cell = row.rstrip(" |").rsplit(" | ", 1)[-1]
        for match in CITATION.finditer(cell):
            current = match.group(1) or current
            cases = re.findall(r"\[([\w-]+)\]", match.group(3) + cell[match.end() :])
            found.append((current, match.group(2), cases))
    return found


def test_every_cited_test_exists():
    cited = citations()
    assert len(cited) >= 45
    for path, name, cases in cited:
        source = (ROOT / "tests" / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{path}::{name}"
        for case in cases:
            assert case in source, f"{path}::{name}[{case}]"


def test_the_table_has_the_issues_cases_and_twenty_more():
    rows = [line for line in DOC.splitlines() if line.startswith("| ") and "---" not in line]
    rows = [row for row in rows if not row.startswith("| bad input or fault |")]
    assert len(rows) >= 60, len(rows)
