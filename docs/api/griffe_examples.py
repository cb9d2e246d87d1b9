"""Griffe extension (mkdocs.yml): an `Example:` section of a docstring renders as code.

The docstrings follow Keras's convention: an `Example:` header, then doctest lines
(`>>>`, `...`, expected output), indented under it or not. Griffe's Google parser
reads `Example:` as an admonition of Markdown text, where `>>>` becomes three nested
block quotes and `[1, 2]` a link reference. This extension renames the header to
`Examples:` and indents its lines under it, so griffe parses them as an examples
section: doctest runs render as highlighted Python console code, other lines as text.
The docstrings themselves are not changed; doctest runs them as written.
"""

import re
import textwrap

import griffe

_HEADER = re.compile(r"^(?P<indent>\s*)Examples?:\s*$")
_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")


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


class ExampleSections(griffe.Extension):
    """Rewrites every object's docstring with `rewrite_examples` before it is parsed."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = rewrite_examples(obj.docstring.value)
