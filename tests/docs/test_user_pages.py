"""The pages users read speak to users: no tracker words, no paths outside the repository.

README.md, the documentation's pages and the examples' READMEs and RESULTS say what the
software does and what was measured, on what machine, with which command. An internal
issue number, "the issue's targets" or a folder beside the clone (`../shared/...`) means
nothing to a user and points nowhere on their machine.
"""

import pathlib
import re

import pytest

from tests.docs.docs_helpers import MAINTAINER_WORDS

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


# The site's pages for users (not the "About the project" pages for the project's developers,
# nor the Results pages, which record each measurement with its commit) are also free of
# the words of the repository's upkeep.
ABOUT_THE_PROJECT = {
    "architecture.md",
    "reliability.md",
    "guides/testing.md",
    "guides/benchmarks.md",
}
USER_PAGES = sorted(
    page
    for page in (ROOT / "docs").rglob("*.md")
    if str(page.relative_to(ROOT / "docs")) not in ABOUT_THE_PROJECT | {"changelog.md"}
)


def offences(text, forbidden=FORBIDDEN):
    """`(line number, what, line)` for each forbidden phrase in `text`."""
    found = []
    for what, pattern in forbidden.items():
        for match in pattern.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            found.append((number, what, text.splitlines()[number - 1].strip()))
    return sorted(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_the_page_speaks_to_users(page):
    found = offences(page.read_text(encoding="utf-8"))
    assert not found, "\n".join(f"line {n}: {what}: {line}" for n, what, line in found)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_the_page_keeps_the_repositorys_upkeep_out(page):
    found = offences(page.read_text(encoding="utf-8"), MAINTAINER_WORDS)
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


@pytest.mark.parametrize(
    "text",
    [
        "The script docs/figures/position_table.py draws it.",
        "`keras.src.layers.Dense` is",
        "TensorFlow ended with a segmentation fault",
        "set SITE_URL when",
        "at commit 4acc153, the",
        "the documentation build runs it",
        "see tests/saving/test_files.py",
        "the figures in examples/translation/RESULTS.md",
    ],
)
def test_the_upkeep_check_finds_the_words(text):
    assert offences(text, MAINTAINER_WORDS)


@pytest.mark.parametrize(
    "text",
    [
        "[translation results](../results/translation/index.md)",
        "pytest tests",
        "a decade of attention 0.506",
        "dropout_seed=1234567",
    ],
)
def test_the_upkeep_check_leaves_user_words(text):
    assert not offences(text, MAINTAINER_WORDS)
