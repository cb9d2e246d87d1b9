"""Random texts over a few words, for the tests of the text pipeline."""

import numpy as np


def random_texts(words, count, min_words, max_words, seed=0):
    """Texts of random lengths, each a random sequence of `words`.

    Args:
        words: the words to draw from.
        count: how many texts.
        min_words: the fewest words in a text.
        max_words: the most words in a text.
        seed: the seed of the draws.

    Returns:
        A list of `count` strings, words separated by single spaces.
    """
    rng = np.random.default_rng(seed)
    return [
        " ".join(rng.choice(words, size=rng.integers(min_words, max_words + 1)))
        for _ in range(count)
    ]
