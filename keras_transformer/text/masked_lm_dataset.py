"""tf.data pipeline for masked-language-model pretraining: raw texts → masked batches."""

import numpy as np
import tensorflow as tf

from keras_transformer.text.classification_dataset import make_classification_dataset
from keras_transformer.text.masking import mask_tokens


def make_masked_lm_dataset(
    texts,
    tokenizer,
    batch_size=32,
    max_length=256,
    mask_rate=0.15,
    max_predictions=None,
    shuffle=True,
    seed=None,
    head_fraction=0.25,
):
    """Batches for pretraining a `MaskedLM`, masked afresh every epoch.

    The texts are laid out and batched as for classification
    (`make_classification_dataset`: `[start] pieces [end]`, long texts cut
    head + tail, length buckets), then `mask_tokens` hides ~15% of each
    batch's tokens with BERT's 80/10/10 rule. Every epoch masks other
    tokens ("dynamic masking", Liu et al., 2019); with a `seed`, the
    sequence of epochs repeats exactly.

    Args:
        texts: list or 1-D NumPy array of str, e.g. every training review and
            sentence (never test text).
        tokenizer: a `SubwordTokenizer` trained with `mask_token=True`.
        batch_size: int, texts per batch. Defaults to `32`.
        max_length: int, the longest row, start and end ids included.
            Defaults to `256`.
        mask_rate: float, share of each row's tokens to predict. Defaults to
            `0.15`.
        max_predictions: int, most predictions per row, or `None` (no limit).
            Defaults to `None`.
        shuffle: bool, shuffle texts and batches each epoch. Defaults to `True`.
        seed: int, seed of the shuffling and the masks. Defaults to `None`
            (random).
        head_fraction: float, share of a cut text taken from its beginning.
            Defaults to `0.25`.

    Returns:
        A `tf.data.Dataset` of `({"token_ids", "mask_positions"}, labels)`
        for `MaskedLM.fit` (see `mask_tokens`).

    Raises:
        ValueError: for a tokenizer without a mask id, and as
            `make_classification_dataset` and `mask_tokens`.

    Example:

    >>> from keras_transformer.text import SubwordTokenizer, make_masked_lm_dataset
    >>> texts = ["A fine film.", "Two dull hours.", "A fine cast.", "Dull."]
    >>> tokenizer = SubwordTokenizer.train(texts * 10, vocabulary_size=30,
    ...                                    byte_fallback=False, mask_token=True)
    >>> dataset = make_masked_lm_dataset(texts, tokenizer, batch_size=4, seed=0)
    >>> inputs, labels = next(iter(dataset))
    >>> sorted(inputs)
    ['mask_positions', 'token_ids']
    >>> inputs["mask_positions"].shape == labels.shape
    True

    `masked_lm.fit(dataset)` then pretrains a `MaskedLM`, whose loss ignores
    the label `pad_id` of unused slots.
    """
    if tokenizer.mask_id is None:
        raise ValueError(
            "The tokenizer has no mask id: train it with "
            "`SubwordTokenizer.train(texts, ..., mask_token=True)`."
        )
    texts = list(texts) if not isinstance(texts, np.ndarray) else texts
    batches = make_classification_dataset(
        texts,
        np.zeros(len(texts), "int32"),
        tokenizer,
        batch_size=batch_size,
        max_length=max_length,
        shuffle=shuffle,
        seed=seed,
        head_fraction=head_fraction,
    )
    # One stateless seed per batch; the stream of seeds changes every epoch, repeatably.
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    special_ids = (tokenizer.pad_id, tokenizer.start_id, tokenizer.end_id)

    @tf.autograph.experimental.do_not_convert
    def mask(batch, batch_seed):
        token_ids, _ = batch
        return mask_tokens(
            token_ids,
            tokenizer.mask_id,
            tokenizer.vocabulary_size,
            mask_rate=mask_rate,
            special_ids=special_ids,
            max_predictions=max_predictions,
            pad_id=tokenizer.pad_id,
            seed=batch_seed,
        )

    return tf.data.Dataset.zip(batches, seeds).map(mask)
