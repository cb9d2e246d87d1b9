"""The documentation site builds strictly, and its API reference names every public name.

`mkdocs build --strict` runs every page's `exec="on"` code block (markdown-exec) and every
figure script (docs/hooks/figures.py), and turns every warning into an error: a broken
link, a docstring mkdocstrings cannot read, or page code that raises fails the build.
"""

import functools
import html
import http.server
import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import textwrap
import threading

import pytest

from tests.docs.docs_helpers import MAINTAINER_WORDS, SUBPACKAGES, public_objects
from tests.fresh_python import run_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
SEARCH_SCRIPT = pathlib.Path(__file__).with_name("search_in_chromium.mjs")
ENTRY = re.compile(r"^::: keras_transformer\.(\w+)\.(\w+)\s*$", re.MULTILINE)


def mkdocs_build(config_dir, site_dir, timeout):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", TF_CPP_MIN_LOG_LEVEL="3")
    env.setdefault("KERAS_BACKEND", "tensorflow")
    flags = ["--strict", "--site-dir", site_dir]
    return run_python("-m", "mkdocs", "build", *flags, cwd=config_dir, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT, site_dir, timeout=600)
    output = result.stdout + result.stderr
    problems = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0, "\n".join(problems) or output[-5000:]
    return site_dir


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    for page in ["getting_started", "concepts/attention", "api/layers", "changelog"]:
        assert (site / page / "index.html").is_file(), page


def page_text(html_text):
    """The words of a page, tags removed."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def test_the_api_pages_render_our_members_and_doctests_as_code(site):
    layers = (site / "api" / "layers" / "multi_head_attention" / "index.html").read_text(
        encoding="utf-8"
    )
    # A doctest prompt highlighted as Python console code, not three block quotes.
    assert '<span class="gp">&gt;&gt;&gt; </span>' in layers
    assert "<blockquote>\n<blockquote>" not in layers
    # Only our own members: nothing keras.layers.Layer defines.
    for inherited in ["add_weight", "call", "get_build_config", "quantize"]:
        assert f'id="keras_transformer.layers.MultiHeadAttention.{inherited}"' not in layers
    assert 'id="keras_transformer.layers.MultiHeadAttention.compute_cache"' in layers
    # The example imports what it uses, as a reader copies it.
    assert ">>> from keras_transformer.layers import MultiHeadAttention" in page_text(layers)
    models = (site / "api" / "models" / "seq2seq_transformer" / "index.html").read_text(
        encoding="utf-8"
    )
    for method in ["generate", "enable_lora", "merge_lora"]:
        assert f'id="keras_transformer.models.Seq2SeqTransformer.{method}"' in models


SOURCE_LINK = re.compile(r'<p class="doc-source"><a href="(?P<href>[^"#]+)#(?P<anchor>[^"]+)">')


def test_every_public_name_links_to_its_source(site):
    linked = {}
    for page in (site / "api").glob("*/*/index.html"):
        text = page.read_text(encoding="utf-8")
        ids = re.findall(r'<h[12] id="(keras_transformer\.\w+\.\w+)"', text)
        links = SOURCE_LINK.findall(text)
        assert len(ids) == len(links), f"{page}: {len(ids)} entries, {len(links)} source links"
        for name, (href, anchor) in zip(ids, links):
            source = (page.parent / href / "index.html").resolve()
            lines = source.read_text(encoding="utf-8")
            number = int(anchor.rsplit("-", 1)[1])
            # The line the link lands on starts the definition (or its decorator).
            match = re.search(rf'id="{anchor}".*?</a>(?P<line>.*?)\n', lines)
            assert match, f"{name}: no line {number} in {source}"
            line = page_text(match["line"]).strip()
            short = name.rsplit(".", 1)[1]
            assert line.startswith(("@", f"class {short}", f"def {short}", f"{short} ")), line
            linked[name] = number
    expected = {f"keras_transformer.{package}.{name}" for package, name, _ in public_objects()}
    assert set(linked) == expected, expected ^ set(linked)


def test_the_math_is_mathml_in_every_page(site):
    pages = {path: path.read_text(encoding="utf-8") for path in site.rglob("*.html")}
    assert any("<math" in text for text in pages.values())
    left = [str(path) for path, text in pages.items() if 'class="arithmatex">\\(' in text]
    assert not left, f"TeX left for a script to typeset: {left}"
    left = [str(path) for path, text in pages.items() if 'class="arithmatex">\\[' in text]
    assert not left, f"TeX left for a script to typeset: {left}"


RETURNS = re.compile(
    r'<span class="doc-section-title">Returns:</span></p>\s*<ul>(?P<items>.*?)</ul>', re.DOTALL
)


def api_pages(site):
    return {
        str(path.relative_to(site)): path.read_text(encoding="utf-8")
        for path in sorted((site / "api").rglob("*.html"))
    }


def test_every_returns_section_is_one_description(site):
    # Griffe's default reads each line of `Returns:` as one returned value: a sentence
    # over three lines became three bullets.
    sections = 0
    for page, text in api_pages(site).items():
        for match in RETURNS.finditer(text):
            sections += 1
            items = match["items"].count("<li")
            assert items == 1, f"{page}: a Returns section in {items} items: {match['items']}"
    assert sections >= 60, sections


def test_no_backtick_shows_literally_on_the_api_pages(site):
    # A code span cut in two by a line split showed as "`(batch," with its spaces lost.
    for page, text in api_pages(site).items():
        prose = re.sub(r"<(pre|code|script)\b.*?</\1>", "", text, flags=re.DOTALL)
        prose = html.unescape(re.sub(r"<[^>]+>", "", prose))
        literal = [line.strip() for line in prose.splitlines() if "`" in line]
        assert not literal, f"{page}: {literal[:3]}"


# What a browser loads when it opens a page (links and anchors are only followed on a click).
LOADED = re.compile(
    r"<(?:script|img|iframe|source|audio|video|embed)\b[^>]*?\ssrc=\"(?P<src>[^\"]*)\""
    r"|<link\b(?P<link>[^>]*)>",
    re.IGNORECASE,
)
LINK_LOADS = re.compile(r'rel="(?:stylesheet|preconnect|preload|modulepreload|dns-prefetch|icon)"')
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def test_no_page_loads_anything_from_another_host(site):
    remote = []
    for page in site.rglob("*.html"):
        for match in LOADED.finditer(page.read_text(encoding="utf-8")):
            if match["src"] is not None:
                url = match["src"]
            elif LINK_LOADS.search(match["link"]):
                url = re.search(r'href="([^"]*)"', match["link"])[1]
            else:
                continue
            if REMOTE.match(url):
                remote.append(f"{page.relative_to(site)}: {url}")
    for sheet in site.rglob("*.css"):
        text = sheet.read_text(encoding="utf-8")
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", text) + re.findall(
            r"@import\s+(?:url\()?['\"]([^'\"]+)", text
        ):
            if REMOTE.match(url):
                remote.append(f"{sheet.relative_to(site)}: {url}")
    assert not remote, "\n".join(sorted(set(remote))[:20])


def test_the_math_font_is_in_the_site_with_its_licence(site):
    from fontTools.ttLib import TTFont

    css = (site / "assets" / "stylesheets" / "math.css").read_text(encoding="utf-8")
    (url,) = re.findall(r'url\("([^"]+)"\)', css)
    font_path = (site / "assets" / "stylesheets" / url).resolve()
    font = TTFont(font_path)
    # The MATH table is what lets the browser grow brackets and draw roots.
    assert "MATH" in font
    assert font["name"].getDebugName(1) == "STIX Two Math"
    licence = (font_path.parent / "STIXTwoMath-OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence
    assert font["name"].getDebugName(0) in licence  # the font's own copyright line
    attention = (site / "concepts" / "attention" / "index.html").read_text(encoding="utf-8")
    assert "assets/stylesheets/math.css" in attention


def test_every_image_a_page_shows_is_in_the_site(site):
    # An `exclude_docs` pattern once dropped the figures with only an INFO line.
    shown = 0
    for page in site.rglob("*.html"):
        for source in re.findall(r'<img[^>]* src="([^"]+)"', page.read_text(encoding="utf-8")):
            if source.startswith(("http:", "https:", "data:")):
                continue
            assert (page.parent / source).resolve().is_file(), f"{page}: {source}"
            shown += 1
    assert (site / "assets" / "figures" / "position_table.png").is_file()
    assert shown >= 2, shown


# Pages for the project's developers, and the Results pages, which record measurements
# command by command: the rest are what a user reads.
NOT_FOR_USERS = ("api/source/", "results/", "architecture/", "reliability/", "guides/testing/")
NOT_FOR_USERS += ("guides/benchmarks/", "changelog/", "404")
CODE = re.compile(r"<pre[^>]*>(.*?)</pre>", re.DOTALL)
SIGNATURE = re.compile(r'<div class="doc-signature[^"]*">(.*?)</div>', re.DOTALL)
WIDTH = 100


def user_pages(site):
    """`(site path, html)` of the pages a user reads."""
    for page in sorted(site.rglob("*.html")):
        path = page.relative_to(site).as_posix()
        if not path.startswith(NOT_FOR_USERS) and not path.startswith(("assets/", "search/")):
            yield path, page.read_text(encoding="utf-8")


def wide_lines(fragment):
    return [line for line in page_text(fragment).splitlines() if len(line) > WIDTH]


def test_code_on_the_user_pages_fits_the_width_of_the_page(site):
    wide = [
        f"{path}: {len(line)} characters: {line[:80]}..."
        for path, text in user_pages(site)
        for block in CODE.findall(text)
        for line in wide_lines(block)
    ]
    assert not wide, "\n".join(wide)


def test_api_signatures_are_formatted_one_argument_a_line(site):
    signatures, wide = 0, []
    for path, text in user_pages(site):
        for signature in SIGNATURE.findall(text):
            signatures += 1
            wide += [f"{path}: {line[:80]}..." for line in wide_lines(signature)]
    assert signatures > 100, signatures
    assert not wide, "\n".join(wide)


def test_every_page_of_the_navigation_links_the_previous_and_next(site):
    pages = [path for path, _ in user_pages(site)]
    assert len(pages) > 60
    for path, text in user_pages(site):
        links = re.findall(r'class="md-footer__link md-footer__link--(prev|next)"', text)
        expected = {"prev", "next"} - ({"prev"} if path == "index.html" else set())
        assert set(links) >= expected, path


def test_the_api_pages_keep_the_repositorys_upkeep_out(site):
    found = []
    for path, text in user_pages(site):
        if path.startswith("api/"):
            article = re.search(r"<article[^>]*>(.*)</article>", text, re.DOTALL).group(1)
            words = page_text(article)
            for what, pattern in MAINTAINER_WORDS.items():
                found += [f"{path}: {what}: {m.group()}" for m in pattern.finditer(words)]
    assert not found, "\n".join(found)


def test_the_results_pages_are_in_the_site(site):
    for name in ["translation", "classification", "positions", "benchmarks"]:
        assert (site / "results" / name / "index.html").is_file(), name
    assert (site / "results" / "positions" / "extrapolation.png").is_file()


def test_the_changelog_page_is_the_changelog(site):
    page = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    from keras_transformer import __version__

    assert f"[{__version__}]" in page
    assert "--8&lt;--" not in page


MINI_CONFIG = """\
site_name: mini
markdown_extensions:
  - pymdownx.superfences
plugins:
  - markdown-exec
"""


def write_mini_site(directory, code):
    (directory / "docs").mkdir()
    (directory / "mkdocs.yml").write_text(MINI_CONFIG)
    block = f'```python exec="on"\n{textwrap.dedent(code).strip()}\n```\n'
    (directory / "docs" / "index.md").write_text(f"# Mini\n\n{block}")


def test_a_page_whose_code_raises_fails_the_strict_build(tmp_path):
    write_mini_site(tmp_path, 'raise RuntimeError("this page went stale")')
    result = mkdocs_build(tmp_path, tmp_path / "site", timeout=120)
    assert result.returncode != 0
    assert "this page went stale" in result.stdout + result.stderr


def test_a_page_whose_code_runs_builds_with_its_output(tmp_path):
    write_mini_site(tmp_path, "print(6 * 7)")
    result = mkdocs_build(tmp_path, tmp_path / "site", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "42" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_every_public_name_is_in_the_api_reference(package):
    module = importlib.import_module(f"keras_transformer.{package}")
    pages = sorted((API / package).glob("*.md"))
    entries = [entry for page in pages for entry in ENTRY.findall(page.read_text(encoding="utf-8"))]
    assert all(where == package for where, _ in entries), entries
    documented = [name for _, name in entries]
    missing = sorted(set(module.__all__) - set(documented))
    assert not missing, f"docs/api/{package}/ has no `::: ...{package}.Name` for {missing}"
    unknown = sorted(set(documented) - set(module.__all__))
    assert not unknown, f"docs/api/{package}/ documents names not in __all__: {unknown}"
    assert len(documented) == len(set(documented)), "a name is documented twice"
    # The subpackage's overview links each of its pages, and the navigation lists them.
    overview = (API / f"{package}.md").read_text(encoding="utf-8")
    navigation = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in pages:
        assert f"]({package}/{page.name})" in overview, page
        assert f": api/{package}/{page.name}\n" in navigation, page


def test_the_api_index_links_every_page():
    index = (API / "index.md").read_text(encoding="utf-8")
    for package in SUBPACKAGES:
        assert f"]({package}.md)" in index, package


BROWSER = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
NODE = shutil.which("node")


@pytest.mark.skipif(not (BROWSER and NODE), reason="needs Chromium and Node 20 (not installed)")
def test_search_returns_results_in_a_browser(site):
    # The theme's search runs in a web worker, which browsers start only for a served site:
    # the built folder is served here as a static host would serve it.
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *args: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = subprocess.run(
            [NODE, "--experimental-websocket", "--no-warnings", str(SEARCH_SCRIPT), BROWSER,
             f"http://127.0.0.1:{server.server_address[1]}/", "-", "beam", "LayerNormalization"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr[-3000:]
    found = {line["query"]: line for line in map(json.loads, result.stdout.strip().splitlines())}
    assert re.match(r"\d+ matching documents", found["beam"]["meta"]), found["beam"]
    assert "Search loops" in found["beam"]["titles"]
    assert found["LayerNormalization"]["titles"][0] == "LayerNormalization"


def test_site_url_and_repo_url_come_from_the_environment(monkeypatch):
    # The host is the deployer's to name: unset, every page links relatively and works from
    # a folder; set, the 404 page finds its stylesheets under a sub-path.
    from mkdocs.config import load_config

    monkeypatch.setenv("SITE_URL", "https://example.org/keras_transformer/")
    monkeypatch.setenv("REPO_URL", "https://example.org/keras_transformer.git")
    config = load_config(str(ROOT / "mkdocs.yml"))
    assert config.site_url == "https://example.org/keras_transformer/"
    assert config.repo_url == "https://example.org/keras_transformer.git"
    # The theme's header link without its script, which would ask the host's API for stars.
    partial = (ROOT / "docs" / "overrides" / "partials" / "source.html").read_text()
    assert 'class="md-source"' in partial and "data-md-component" not in partial.split("-#}")[1]
