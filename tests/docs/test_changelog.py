"""The version lives in one place, and CHANGELOG.md's newest release names it."""

import datetime
import pathlib
import re

import pytest

import keras_transformer
from keras_transformer.version import __version__

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\S+)$", re.MULTILINE)


def releases():
    return [(m.group("version"), m.group("date")) for m in RELEASE.finditer(CHANGELOG)]


def test_the_newest_release_is_the_package_version():
    assert keras_transformer.__version__ == __version__
    assert SEMVER.match(__version__), __version__
    assert releases(), "CHANGELOG.md has no `## [X.Y.Z] - YYYY-MM-DD` section"
    assert releases()[0][0] == __version__


def test_the_releases_are_semantic_versions_newest_first():
    found = releases()
    for version, date in found:
        assert SEMVER.match(version), version
        datetime.date.fromisoformat(date)
    keys = [tuple(int(part) for part in version.split(".")) for version, _ in found]
    assert keys == sorted(keys, reverse=True), keys
    assert [date for _, date in found] == sorted((date for _, date in found), reverse=True)


def test_unreleased_changes_come_first():
    headings = re.findall(r"^## .*$", CHANGELOG, re.MULTILINE)
    assert headings[0] == "## [Unreleased]", headings[:2]


def test_pyproject_reads_the_version_and_never_repeats_it():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads(PYPROJECT)
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "keras_transformer.version.__version__"
    assert __version__ not in PYPROJECT


def test_the_site_includes_the_changelog_rather_than_a_copy():
    page = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    assert page.strip() == '--8<-- "CHANGELOG.md"'
