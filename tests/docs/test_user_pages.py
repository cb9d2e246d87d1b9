"""The pages users read speak to users: no tracker words, no paths outside the repository.

README.md, the documentation's pages and the examples' READMEs and RESULTS say what the
software does and what was measured, on what machine, with which command. An internal
issue number, "the issue's targets" or a folder beside the clone (`../shared/...`) means
nothing to a user and points nowhere on their machine.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The changelog page includes CHANGELOG.md; the benchmarks' RESULTS are linked from the guides.
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "RESULTS.md"]
    + list((ROOT / "docs").rglob("*.md"))
    + list((ROOT / "examples").rglob("README.md"))
    + list((ROOT / "examples").rglob("RESULTS.md"))
)

FORBIDDEN = {
    "an issue number": re.compile(r"\bissues?\s*#?\d+|(?<![\w&/#])#\d+\b", re.IGNORECASE),
    "the tracker's issue": re.compile(r"\b(?:the|this|that) issue\b|\bissue's\b", re.IGNORECASE),
    "targets met or not": re.compile(
        r"\btargets?\s+(?:is|are|was|were)(?:\s+not)?\s+(?:met|reached)"
        r"|^#+\s*targets\b|\bthe\s+targets?\s+were\b",
        re.IGNORECASE | re.MULTILINE,
    ),
    "a path outside the repository": re.compile(r"\.\./shared\b|\bshared/data\b|/work/"),
    "a session": re.compile(r"\bthis session\b", re.IGNORECASE),
}


def offences(text):
    """`(line number, what, line)` for each forbidden phrase in `text`."""
    found = []
    for what, pattern in FORBIDDEN.items():
        for match in pattern.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            found.append((number, what, text.splitlines()[number - 1].strip()))
    return sorted(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_the_page_speaks_to_users(page):
    found = offences(page.read_text(encoding="utf-8"))
    assert not found, "\n".join(f"line {n}: {what}: {line}" for n, what, line in found)


def test_the_pages_are_all_there():
    names = {str(page.relative_to(ROOT)) for page in PAGES}
    assert {
        "README.md",
        "docs/index.md",
        "docs/guides/classification.md",
        "examples/text_classification/RESULTS.md",
        "examples/translation/RESULTS.md",
        "examples/text_classification/data/sst2/README.md",
    } <= names


@pytest.mark.parametrize(
    "text",
    [
        "The issue's targets (86% on SST-2, 89% on IMDB) are not reached.",
        "The file says what the issue's targets were.",
        "The file says what the targets\nwere (86% on SST-2)",
        "(Issue #18.)",
        "the sections titled Issue 15 and",
        "read from `../shared/data/imdb`",
        "## Targets",
        "run in this session",
    ],
)
def test_the_check_finds_tracker_words(text):
    assert offences(text)


@pytest.mark.parametrize(
    "text",
    [
        "the decoder reads the target shifted right",
        "source words × target words",
        "LoRA targets every projection",
        "`&#8203;` and a heading anchor (#usage)",
    ],
)
def test_the_check_leaves_ordinary_words(text):
    assert not offences(text)
