"""MkDocs hook: the pages' TeX becomes MathML when the site is built.

`pymdownx.arithmatex` (generic mode) wraps `$...$` in `<span class="arithmatex">\\(...\\)</span>`
and `$$...$$` in `<div class="arithmatex">\\[...\\]</div>`, for a JavaScript renderer to
typeset in the browser. This hook converts them with latex2mathml instead, so the built
site shows its mathematics with no script and no network: every current browser renders
MathML. A formula latex2mathml cannot read raises, and the build fails.
"""

import html
import re

from latex2mathml.converter import convert

_MATH = re.compile(r'<(?P<tag>span|div) class="arithmatex">(?P<tex>.*?)</(?P=tag)>', re.DOTALL)
_DELIMITERS = {"span": (r"\(", r"\)"), "div": (r"\[", r"\]")}


def tex_to_mathml(tex, block=False):
    """MathML for the TeX `tex`, displayed as a block or inline."""
    return convert(tex.strip(), display="block" if block else "inline")


def _replace(match, page):
    tag = match["tag"]
    tex = html.unescape(match["tex"]).strip()
    opening, closing = _DELIMITERS[tag]
    if tex.startswith(opening) and tex.endswith(closing):
        tex = tex[len(opening) : -len(closing)]
    try:
        mathml = tex_to_mathml(tex, block=tag == "div")
    except Exception as error:
        raise ValueError(f"{page}: latex2mathml cannot convert {tex!r}: {error}") from error
    return f'<{tag} class="arithmatex">{mathml}</{tag}>'


_INLINE_TEX = re.compile(r"\\\((?P<tex>.+?)\\\)")


def _convert_titles(items, page):
    """A heading's math in the table of contents, which holds the heading's raw text."""
    for item in items:
        item.title = _INLINE_TEX.sub(
            lambda match: tex_to_mathml(html.unescape(match["tex"])), item.title
        )
        _convert_titles(item.children, page)


def on_page_content(html_text, page, **kwargs):
    _convert_titles(page.toc, page)
    return _MATH.sub(lambda match: _replace(match, page.file.src_uri), html_text)
