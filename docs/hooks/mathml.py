"""MkDocs hook: the pages' TeX becomes MathML when the site is built.

`pymdownx.arithmatex` (generic mode) wraps `$...$` in `<span class="arithmatex">\\(...\\)</span>`
and `$$...$$` in `<div class="arithmatex">\\[...\\]</div>`, for a JavaScript renderer to
typeset in the browser. This hook converts them with latex2mathml instead, so the built
site shows its mathematics with no script and no network: every current browser renders
MathML. A formula latex2mathml cannot read raises, and the build fails.

What latex2mathml leaves to a TeX-aware renderer is done here, so that browsers'
MathML (MathML Core) sets them as TeX would:

- A function name (`\\sin`, `\\log`, `\\operatorname{softmax}`) gets a thin space from an
  operand next to it: `\\sin a \\sin b` reads "sin a sin b", not "sinasinb". Before a
  parenthesis there is none: `\\cos(a - b)`.
- A slash (`QK^\\top/\\sqrt{d_k}`) gets no space on either side, as in TeX.
- Named space widths (`negativethinmathspace`, ...), which MathML Core does not read,
  become lengths; the negative ones (`\\!`), which only undo spacing TeX would add,
  are dropped.

The page's stylesheet (docs/assets/stylesheets/math.css) sets the formulas in STIX Two
Math, a font with an OpenType MATH table, which the browser needs to grow brackets
around fractions and to draw square roots; docs/hooks/math_font.py puts the font in
the site.
"""

import html
import re
import xml.etree.ElementTree as ElementTree

from latex2mathml.converter import convert

_NAMESPACE = "http://www.w3.org/1998/Math/MathML"
ElementTree.register_namespace("", _NAMESPACE)
_FUNCTION_NAME = re.compile(r"^[A-Za-z]{2,}$")
_THIN_SPACE = "0.1667em"
_SCRIPTED = {"msub", "msup", "msubsup", "munder", "mover", "munderover", "mfrac", "mroot"}
_NAMED_WIDTHS = {
    "veryverythinmathspace": "0.0556em",
    "verythinmathspace": "0.1111em",
    "thinmathspace": "0.1667em",
    "mediummathspace": "0.2222em",
    "thickmathspace": "0.2778em",
    "verythickmathspace": "0.3333em",
    "veryverythickmathspace": "0.3889em",
}


def _local(element):
    return element.tag.rsplit("}", 1)[-1]


def _is_function(element):
    """A function name, alone or as the base of a sub/superscript (`\\max_j`)."""
    if _local(element) in ("msub", "msup", "msubsup", "munder", "mover") and len(element):
        element = element[0]
    return _local(element) == "mi" and bool(_FUNCTION_NAME.match(element.text or ""))


def _opens_with_fence(element):
    """An operand that starts with its own bracket: `\\left( ... \\right)`."""
    while _local(element) == "mrow" and len(element):
        element = element[0]
    return _local(element) == "mo"


def _thin_space():
    return ElementTree.Element(f"{{{_NAMESPACE}}}mspace", width=_THIN_SPACE)


def _respace(element):
    for child in list(element):
        _respace(child)
        tag = _local(child)
        if tag == "mo" and _FUNCTION_NAME.match(child.text or ""):
            # `\\operatorname{name}` comes as an operator, which MathML Core spaces by
            # a thick space on each side; TeX sets it as it sets `\\sin`.
            child.tag = f"{{{_NAMESPACE}}}mi"
        elif tag == "mo" and child.text == "/":
            # TeX sets a slash as an ordinary symbol; MathML Core spaces it as an operator.
            child.set("lspace", "0")
            child.set("rspace", "0")
        elif tag == "mspace":
            width = child.get("width", "")
            if width.startswith("negative"):
                element.remove(child)
            elif width in _NAMED_WIDTHS:
                child.set("width", _NAMED_WIDTHS[width])
    if _local(element) in _SCRIPTED:
        return  # the children of a script, fraction or root have fixed roles
    children = list(element)
    for index in reversed(range(len(children))):
        child = children[index]
        if not _is_function(child):
            continue
        after = children[index + 1] if index + 1 < len(children) else None
        before = children[index - 1] if index > 0 else None
        if after is not None and _local(after) != "mspace" and not _opens_with_fence(after):
            element.insert(index + 1, _thin_space())
        if before is not None and _local(before) not in ("mo", "mspace"):
            element.insert(index, _thin_space())


def spaced_mathml(mathml):
    """`mathml` with function names spaced and named space widths as lengths."""
    root = ElementTree.fromstring(mathml)
    _respace(root)
    return ElementTree.tostring(root, encoding="unicode", short_empty_elements=True)


_MATH = re.compile(r'<(?P<tag>span|div) class="arithmatex">(?P<tex>.*?)</(?P=tag)>', re.DOTALL)
_DELIMITERS = {"span": (r"\(", r"\)"), "div": (r"\[", r"\]")}


def tex_to_mathml(tex, block=False):
    """MathML for the TeX `tex`, displayed as a block or inline."""
    return spaced_mathml(convert(tex.strip(), display="block" if block else "inline"))


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
