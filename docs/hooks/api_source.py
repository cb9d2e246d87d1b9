"""MkDocs hook: every entry of the API reference links to its source, shown in the site.

For each module that defines a public name, a page `api/source/<module path>.md` shows
the module's code with numbered lines; each public name's heading on the API pages gets
a "source" link to its first line there. The source pages are made at build time from
the files being documented, so they always match the docstrings beside them, and they
need no repository host: the site reads the same offline. They are left out of the
navigation and of the search index.
"""

import importlib
import inspect
import pathlib
import re

from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ["layers", "ops", "models", "generation", "training", "text", "saving", "distribution"]
_HEADING = re.compile(
    r'(<h(?P<level>[12]) id="(?P<id>keras_transformer\.\w+\.\w+)"[^>]*>.*?</h(?P=level)>)',
    re.DOTALL,
)


def _definition_line(path, name):
    """The line of `name = ...` (or `name: type = ...`) at the top level of `path`."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if re.match(rf"{re.escape(name)}\s*[:=]", line):
            return number
    raise LookupError(f"{name} is not assigned at the top level of {path}")


def locations():
    """`{"keras_transformer.<package>.<name>": (file relative to the root, line)}`."""
    found = {}
    for package in PACKAGES:
        module = importlib.import_module(f"keras_transformer.{package}")
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                path = pathlib.Path(inspect.getsourcefile(obj))
                line = inspect.getsourcelines(obj)[1]
            else:  # a constant: found where its package's modules assign it
                package_dir = pathlib.Path(module.__file__).parent
                for path in sorted(package_dir.glob("*.py")):
                    try:
                        line = _definition_line(path, name)
                        break
                    except LookupError:
                        continue
                else:
                    raise LookupError(f"keras_transformer.{package}.{name}: no definition found")
            found[f"keras_transformer.{package}.{name}"] = (path.resolve().relative_to(ROOT), line)
    return found


def source_page_uri(path):
    return f"api/source/{path.with_suffix('').as_posix()}.md"


def source_page(path):
    code = (ROOT / path).read_text(encoding="utf-8")
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return (
        "---\nsearch:\n  exclude: true\n---\n\n"
        f"# `{path.as_posix()}`\n\n"
        f'{fence}python linenums="1"\n{code.rstrip()}\n{fence}\n'
    )


_LOCATIONS = {}


def on_files(files, config, **kwargs):
    _LOCATIONS.clear()
    _LOCATIONS.update(locations())
    for path in sorted({path for path, _ in _LOCATIONS.values()}):
        files.append(File.generated(config, source_page_uri(path), content=source_page(path)))
    return files


def on_page_content(html, page, **kwargs):
    uri = page.file.src_uri
    if not uri.startswith("api/") or uri.startswith("api/source/"):
        return html

    def add_link(match):
        where = _LOCATIONS.get(match["id"])
        if where is None:
            return match[0]
        path, line = where
        target = source_page_uri(path)[: -len(".md")] + "/"
        href = get_relative_url(target, page.url or ".") + f"#__codelineno-0-{line}"
        return (
            f'{match[0]}\n<p class="doc-source"><a href="{href}">Source: '
            f"<code>{path.as_posix()}</code>, line {line}</a></p>"
        )

    return _HEADING.sub(add_link, html)
