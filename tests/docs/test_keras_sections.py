"""docs/api/griffe_keras_sections.py: Keras-style sections become ones griffe renders."""

from griffe import Docstring, DocstringSectionKind, Parser

from tests.docs.docs_helpers import keras_sections


def parse(text):
    return Docstring(text).parse(Parser.google, warnings=False)


def kinds(text):
    return [section.kind for section in parse(text)]


FLAT = """Summary.

Args:
    x: a value.

Example:

>>> double([1])
[1, 1]

Text between.

>>> 1 + 1
2

References:
    A paper.
"""

INDENTED = """Summary.

Example:
    >>> double([1])
    [1, 1]

Returns:
    A list.
"""


def test_an_unindented_example_becomes_an_examples_section():
    assert DocstringSectionKind.examples not in kinds(FLAT)
    rewritten = keras_sections.rewrite_examples(FLAT)
    parsed = parse(rewritten)
    examples = [s for s in parsed if s.kind is DocstringSectionKind.examples]
    assert len(examples) == 1
    assert [kind for kind, _ in examples[0].value] == [
        DocstringSectionKind.examples,
        DocstringSectionKind.text,
        DocstringSectionKind.examples,
    ]
    assert examples[0].value[0][1] == ">>> double([1])\n[1, 1]"
    # The sections around it are untouched.
    assert parsed[1].kind is DocstringSectionKind.parameters
    assert parsed[-1].kind is DocstringSectionKind.admonition


def test_an_indented_example_becomes_an_examples_section_and_returns_stays():
    rewritten = keras_sections.rewrite_examples(INDENTED)
    assert kinds(rewritten) == [
        DocstringSectionKind.text,
        DocstringSectionKind.examples,
        DocstringSectionKind.returns,
    ]


def test_call_arguments_become_a_list():
    text = """Summary.

Call arguments:
    inputs: a tensor
        of any shape.
    mask_a, mask_b: Keras masks.

Returns:
    A tensor.
"""
    rewritten = keras_sections.rewrite_call_arguments(text)
    assert (
        "Call arguments:\n"
        "    - `inputs`: a tensor of any shape.\n"
        "    - `mask_a`, `mask_b`: Keras masks.\n"
        "\n"
        "Returns:"
    ) in rewritten


def test_a_docstring_without_those_sections_is_unchanged():
    text = "Summary.\n\nArgs:\n    x: a value.\n\nReturns:\n    x."
    assert keras_sections.rewrite_call_arguments(keras_sections.rewrite_examples(text)) == text


def test_an_example_gets_the_imports_its_names_need():
    import keras
    import numpy as np

    from keras_transformer.layers import MultiHeadAttention

    namespace = {
        "keras": keras,
        "np": np,
        "ops": keras.ops,
        "MultiHeadAttention": MultiHeadAttention,
    }
    docstring = """Summary.

    Example:

    >>> x = np.zeros((1, 2))
    >>> layer = MultiHeadAttention(num_heads=2)
    >>> y = ops.add(x, 1)
    >>> import math
    >>> math.pi > 3
    True
    """
    shown = keras_sections.with_imports(docstring, namespace)
    lines = [line.strip() for line in shown.splitlines() if ">>>" in line]
    assert lines[:3] == [
        ">>> import numpy as np",
        ">>> from keras import ops",
        ">>> from keras_transformer.layers import MultiHeadAttention",
    ]
    assert lines[3] == ">>> x = np.zeros((1, 2))"
    # What the example binds or Python provides is not imported again.
    assert not any("import math" in line for line in lines[:3])


def test_an_example_that_imports_everything_is_unchanged():
    docstring = ">>> import keras\n>>> keras.ops.add(1, 1)\n"
    assert keras_sections.with_imports(docstring, {"keras": object()}) == docstring
