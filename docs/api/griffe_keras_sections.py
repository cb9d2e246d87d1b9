"""Griffe extension (mkdocs.yml): Keras-style docstring sections render as intended.

The docstrings follow Keras's conventions, which griffe's Google parser reads as
admonitions of Markdown text:

- `Example:` then doctest lines (`>>>`, `...`, expected output), indented under it or
  not: `>>>` would become three nested block quotes and `[1, 2]` a link reference.
  The header becomes `Examples:` with its lines indented under it, so griffe parses an
  examples section: doctest runs render as highlighted Python console code, other
  lines as text.
- `Call arguments:` then `name: description` items like `Args:`: the items would run
  together into one paragraph. They become a Markdown list, one item per argument.
- Doctests run with the globals of their module, so an example may use `keras`, `np` or
  the class it documents without importing them; a reader who copies it from the page
  has none of those. The import lines the example needs are added before its first
  `>>>` line, found from the names it uses and what they are in the module.

The docstrings themselves are not changed. tests/docs/docs_helpers.py runs each example
as the page shows it, imports included, in an empty namespace.
"""

import ast
import builtins
import doctest
import importlib
import re
import sys
import textwrap
import types

import griffe

_HEADER = re.compile(r"^(?P<indent>\s*)Examples?:\s*$")
_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_CALL_ARGUMENTS = re.compile(r"^Call arguments:\s*$")
_ITEM = re.compile(r"^(?P<names>\*{0,2}\w+(?:, \*{0,2}\w+)*): (?P<text>.*)$")


def rewrite_call_arguments(text):
    """Returns `text` with each `Call arguments:` section's items as a Markdown list."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        if not _CALL_ARGUMENTS.match(lines[i]):
            i += 1
            continue
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][:1].isspace()):
            end += 1
        while end > i + 1 and not lines[end - 1].strip():
            end -= 1
        body = textwrap.dedent("\n".join(lines[i + 1 : end])).split("\n")
        items = []
        for line in body:
            item = _ITEM.match(line)
            if item and not line[:1].isspace():
                names = ", ".join(f"`{name.strip()}`" for name in item["names"].split(","))
                items.append(f"- {names}: {item['text']}")
            elif items and line.strip():
                items[-1] += " " + line.strip()
            elif line.strip():  # not an item: keep the section as written
                items = None
                break
        if items is None:
            out.extend(lines[i + 1 : end])
        else:
            out.extend("    " + item for item in items)
        i = end
    return "\n".join(out)


def rewrite_examples(text):
    """Returns `text` with each `Example:` section turned into an indented `Examples:` one."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        header = _HEADER.match(lines[i])
        if not header or header.group("indent"):
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        indented = j < len(lines) and lines[j][:1].isspace()
        end = j
        in_fence = False
        while end < len(lines):
            line = lines[end]
            if line.strip().startswith("```"):
                in_fence = not in_fence
            elif not in_fence and line.strip() and not line[:1].isspace():
                # Indented content ends at any line back at column 0; unindented
                # content ends at the next section header.
                if indented or _SECTION.match(line):
                    break
            end += 1
        while end > j and not lines[end - 1].strip():
            end -= 1
        body = textwrap.dedent("\n".join(lines[j:end]))
        out.append("Examples:")
        out.extend(("    " + line) if line.strip() else "" for line in body.split("\n"))
        if end < len(lines):
            out.append("")
        i = end
    return "\n".join(out)


# The subpackages whose `__all__` is the public API; tests/docs/docs_helpers.py reads it too.
PUBLIC_PACKAGES = (
    "layers",
    "ops",
    "models",
    "generation",
    "training",
    "text",
    "saving",
    "distribution",
)


def _free_names(sources):
    """The names the code in `sources` reads without binding them, in first-use order."""
    bound, used = set(), []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    used.append(node.id)
                else:
                    bound.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
    seen = set()
    return [
        name
        for name in used
        if name not in bound
        and not hasattr(builtins, name)
        and not (name in seen or seen.add(name))
    ]


def _public_home(value, name):
    """The public subpackage of keras_transformer that exports `value` as `name`, if any."""
    for package in PUBLIC_PACKAGES:
        module = sys.modules.get(f"keras_transformer.{package}")
        if module is not None and getattr(module, name, None) is value:
            if name in getattr(module, "__all__", ()):
                return module.__name__
    return None


def import_line(name, value):
    """The line that binds `name` to `value` as the module's globals do, or None."""
    if isinstance(value, types.ModuleType):
        full = value.__name__
        if full == name:
            return f"import {name}"
        parent, _, leaf = full.rpartition(".")
        if leaf == name and parent:
            return f"from {parent} import {name}"
        return f"import {full} as {name}"
    home = _public_home(value, name)
    if home is None:
        home = getattr(value, "__module__", None)
        if not home or getattr(sys.modules.get(home), name, None) is not value:
            return None
    return f"from {home} import {name}"


def example_imports(docstring, namespace):
    """The import lines the docstring's doctests need, given the globals they run with."""
    examples = doctest.DocTestParser().get_examples(docstring)
    lines = []
    for name in _free_names(example.source for example in examples):
        if name in namespace:
            line = import_line(name, namespace[name])
            if line and line not in lines:
                lines.append(line)
    plain = sorted(line for line in lines if line.startswith("import "))
    ours = sorted(line for line in lines if line.startswith("from keras_transformer"))
    others = sorted(set(lines) - set(plain) - set(ours))
    return plain + others + ours


def with_imports(docstring, namespace):
    """`docstring` with the imports its doctests need before its first `>>>` line."""
    lines = docstring.split("\n")
    first = next((i for i, line in enumerate(lines) if line.lstrip().startswith(">>>")), None)
    if first is None:
        return docstring
    needed = example_imports(docstring, namespace)
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    return "\n".join(lines[:first] + [f"{indent}>>> {line}" for line in needed] + lines[first:])


def module_namespace(module_path):
    """The globals of the module `module_path`, imported, or {} when it cannot be."""
    try:
        return vars(importlib.import_module(module_path))
    except Exception:  # a page still builds; the doctest test reports the example
        return {}


class KerasSections(griffe.Extension):
    """Rewrites every object's docstring before griffe parses it."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is None:
            return
        text = obj.docstring.value
        if ">>>" in text:
            text = with_imports(text, module_namespace(obj.module.path))
        obj.docstring.value = rewrite_call_arguments(rewrite_examples(text))
