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

The docstrings themselves are not changed; doctest runs them as written.
"""

import re
import textwrap

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


class KerasSections(griffe.Extension):
    """Rewrites every object's docstring before griffe parses it."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = rewrite_call_arguments(rewrite_examples(obj.docstring.value))
