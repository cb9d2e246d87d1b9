"""Settings of the small example runs the tests share (see conftest.py's fixtures)."""

# A small classification run: a 600-piece vocabulary, texts cut at 48 pieces, float32, one
# encoder layer 64 wide (it still scores ~0.70 on SST-2 dev after 3 epochs on 12,000 phrases).
CLASSIFICATION_SMALL = [
    "--vocabulary-size", "600", "--max-length", "48", "--precision", "float32",
    "--num-layers", "1", "--hidden-dim", "64", "--intermediate-dim", "256",
]  # fmt: skip
