"""Translating raw sentences with a trained model and its tokenizer, in batches."""

import numpy as np

from keras_transformer.text.translation_dataset import tokenize_source


def source_ids(tokenizer, sentences, max_length=None, bucket=8):
    """Encoder ids for `sentences`, padded with 0 to a multiple of `bucket`.

    Padding to buckets keeps the compiled generation from retracing for every length.
    """
    ids = tokenize_source(tokenizer, sentences, max_length=max_length)
    length = int(ids.bounding_shape()[1])
    length = -(-length // bucket) * bucket
    return ids.to_tensor(default_value=0, shape=[None, length]).numpy().astype("int32")


def translate(
    model,
    tokenizer,
    sentences,
    batch_size=64,
    beam_size=4,
    length_penalty=0.6,
    max_source_length=128,
):
    """Translates a list of sentences; returns a list of str.

    Beam search (`beam_size > 1`) with the GNMT length penalty, or greedy with
    `beam_size=1`; each translation is at most its source's length + 50 tokens, so
    the result does not depend on the batch. Sentences are sorted by length so each
    batch pads little.
    """
    order = np.argsort([len(s) for s in sentences])
    outputs = [None] * len(sentences)
    for begin in range(0, len(sentences), batch_size):
        chosen = order[begin : begin + batch_size]
        ids = source_ids(tokenizer, [sentences[i] for i in chosen], max_source_length)
        generated = model.generate(
            ids,
            method="beam" if beam_size > 1 else "greedy",
            beam_size=beam_size,
            length_penalty=length_penalty,
            start_id=tokenizer.start_id,
            end_id=tokenizer.end_id,
        )
        for i, text in zip(chosen, tokenizer.decode(np.asarray(generated))):
            outputs[i] = text
    return outputs
