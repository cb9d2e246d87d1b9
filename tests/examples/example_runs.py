"""Settings of the small example runs the tests share (see conftest.py's fixtures)."""

# A small classification run: a 600-piece vocabulary, texts cut at 48 pieces, float32.
CLASSIFICATION_SMALL = ["--vocabulary-size", "600", "--max-length", "48", "--precision", "float32"]
