"""Translating raw sentences with a trained model and its tokenizer, in batches."""

import keras
import numpy as np

from keras_transformer.text.translation_dataset import tokenize_source

# Shortest padded source; longer ones are padded to the next power of two, so translating
# any set of sentences up to 128 tokens compiles the search for at most four lengths.
MIN_PADDED_LENGTH = 16


def padded_length(length):
    return max(MIN_PADDED_LENGTH, 1 << max(0, length - 1).bit_length())


def source_ids(tokenizer, sentences, max_length=None, rows=None):
    """Encoder ids for `sentences`: `rows` rows (default: one per sentence), padded with `pad_id`.

    Every batch of a call has the same number of rows and one of a few lengths, so the
    compiled generation traces a handful of programs rather than one per batch.
    """
    ids = tokenize_source(tokenizer, sentences, max_length=max_length)
    length = padded_length(int(ids.bounding_shape()[1]))
    pad_id = tokenizer.pad_id
    ids = ids.to_tensor(default_value=pad_id, shape=[None, length]).numpy().astype("int32")
    rows = len(sentences) if rows is None else rows
    return np.pad(ids, [(0, rows - len(sentences)), (0, 0)], constant_values=pad_id)


def translate(
    model,
    tokenizer,
    sentences,
    batch_size=64,
    beam_size=4,
    length_penalty=0.6,
    max_source_length=128,
    progress=False,
):
    """Translates a list of sentences; returns a list of str.

    Beam search (`beam_size > 1`) with the GNMT length penalty, or greedy with
    `beam_size=1`; each translation is at most its source's length + 50 tokens, so
    the result does not depend on the batch. Sentences are sorted by length so each
    batch pads little. An empty (or blank) sentence translates to "", as in the
    SavedModel of `export_serving`. `progress=True` shows a Keras progress bar.
    """
    outputs = ["" for _ in sentences]
    todo = [i for i, sentence in enumerate(sentences) if sentence.strip()]
    todo.sort(key=lambda i: len(sentences[i]))
    rows = min(batch_size, 1 << max(0, len(todo) - 1).bit_length())
    bar = keras.utils.Progbar(len(todo), unit_name="sentence") if progress else None
    for begin in range(0, len(todo), rows):
        chosen = todo[begin : begin + rows]
        ids = source_ids(tokenizer, [sentences[i] for i in chosen], max_source_length, rows)
        generated = model.generate(
            ids,
            method="beam" if beam_size > 1 else "greedy",
            beam_size=beam_size,
            length_penalty=length_penalty,
            start_id=tokenizer.start_id,
            end_id=tokenizer.end_id,
        )
        texts = tokenizer.decode(np.asarray(generated)[: len(chosen)])
        for i, text in zip(chosen, texts):
            outputs[i] = text
        if bar is not None:
            bar.add(len(chosen))
    return outputs
