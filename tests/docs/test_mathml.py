"""docs/hooks/mathml.py: TeX becomes MathML that browsers set as TeX would."""

import importlib.util
import pathlib
import re

PATH = pathlib.Path(__file__).resolve().parents[2] / "docs" / "hooks" / "mathml.py"
SPEC = importlib.util.spec_from_file_location("docs_mathml_hook", PATH)
mathml = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(mathml)

THIN = '<mspace width="0.1667em" />'


def tokens(tex):
    """The MathML's leaf elements in order, spaces as `_`."""
    out = mathml.tex_to_mathml(tex)
    return [
        "_" if leaf.startswith("<mspace") else re.sub(r"<[^>]+>", "", leaf)
        for leaf in re.findall(r"<m[ion]\b[^>]*>[^<]*</m[ion]>|<mspace[^>]*/>", out)
    ]


def test_a_function_name_is_spaced_from_its_operands():
    # "sinasinb + cosacosb" before: four names run into their arguments.
    assert tokens(r"\sin a \sin b + \cos a \cos b") == [
        "sin", "_", "a", "_", "sin", "_", "b", "+", "cos", "_", "a", "_", "cos", "_", "b",
    ]  # fmt: skip


def test_no_space_before_a_bracket_or_inside_a_script():
    assert tokens(r"\cos(a - b)") == ["cos", "(", "a", "−", "b", ")"]
    assert THIN not in mathml.tex_to_mathml(r"\sin\!\left(\frac{p}{2}\right)")
    assert tokens(r"\max_j x") == ["max", "j", "_", "x"]


def test_operatorname_is_set_as_a_function_not_an_operator():
    out = mathml.tex_to_mathml(r"\operatorname{softmax}(x) + \operatorname{diag} D")
    assert "<mi>softmax</mi><mo" in out
    assert f"<mi>diag</mi>{THIN}<mi>D</mi>" in out
    assert "<mo>softmax</mo>" not in out


def test_named_space_widths_become_lengths():
    out = mathml.tex_to_mathml(r"a \, b \! c \qquad d")
    assert "mathspace" not in out
    assert '<mspace width="0.167em" />' in out and '<mspace width="2em" />' in out


def test_a_slash_is_not_spaced_as_an_operator():
    assert '<mo lspace="0" rspace="0">/</mo>' in mathml.tex_to_mathml(r"QK^\top/\sqrt{d_k}")
