"""The serving function of a `TransformerClassifier`: raw text in, label and probabilities out.

`export_serving` (in `serving.py`) checks the common arguments, picks this function for a
classifier and writes the SavedModel; this module only says what the served graph computes.
"""

from keras_transformer.text.classification_dataset import (
    head_and_tail_sizes,
    tokenize_for_classification,
)

DEFAULT_MAX_LENGTH = 256
DEFAULT_HEAD_FRACTION = 0.25


def make_classify_fn(model, tokenizer, max_length=None, head_fraction=None):
    """The function `export_serving` traces for a `TransformerClassifier`.

    It tokenizes a batch of texts with `tokenize_for_classification` (the layout and
    head + tail truncation of `make_classification_dataset`), pads the ids with 0,
    runs the model in inference mode and takes the softmax of its logits in float32.

    Args:
        model: a `TransformerClassifier`.
        tokenizer: the tokenizer the model was trained with, one of TensorFlow ops
            (a `SubwordTokenizer`, a `MarianTokenizer`, or the graph version of a
            `WordPieceTokenizer` or `BytePairTokenizer`, which `export_serving`
            makes).
        max_length: int >= 3, the longest row (start and end ids included); use the
            value the model was trained with. Defaults to `None`, meaning `256`
            (`make_classification_dataset`'s default).
        head_fraction: float in `[0, 1]`, as given to `make_classification_dataset`.
            Defaults to `None`, meaning `0.25`.

    Returns:
        A function from a 1-D `tf.string` tensor `sentences` to
        `{"label": int32 (batch,), "probabilities": float32 (batch, num_classes)}`.

    Example:

    Called eagerly here; `export_serving` traces it into the SavedModel.

    >>> import tensorflow as tf
    >>> from keras_transformer.models import TransformerClassifier
    >>> from keras_transformer.text import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["A moving film.", "Two dull hours."] * 10,
    ...                                    vocabulary_size=30, byte_fallback=False)
    >>> model = TransformerClassifier(tokenizer.vocabulary_size, num_classes=2,
    ...                               num_layers=1, hidden_dim=16, num_heads=2,
    ...                               intermediate_dim=32)
    >>> classify = make_classify_fn(model, tokenizer, max_length=128)
    >>> outputs = classify(tf.constant(["A moving film.", "Two dull hours."]))
    >>> outputs["probabilities"].shape.as_list(), outputs["label"].dtype.name
    ([2, 2], 'int32')
    """
    import tensorflow as tf  # Only the TensorFlow backend exports.

    max_length = DEFAULT_MAX_LENGTH if max_length is None else max_length
    head_fraction = DEFAULT_HEAD_FRACTION if head_fraction is None else head_fraction
    head_and_tail_sizes(max_length, head_fraction)  # Checks both, naming the bad one.
    if model.position == "learned" and max_length > model.max_sequence_length:
        raise ValueError(
            f"`max_length` ({max_length}) exceeds the model's learned positions "
            f"(max_sequence_length={model.max_sequence_length}). Pass the `max_length` the "
            f"model was trained with, at most {model.max_sequence_length}."
        )
    if tokenizer.vocabulary_size != model.vocabulary_size:
        raise ValueError(
            f"The tokenizer has {tokenizer.vocabulary_size} ids but the model embeds "
            f"{model.vocabulary_size}: pass the tokenizer the model was trained with."
        )
    if model.pad_id != tokenizer.pad_id:
        raise ValueError(
            f"The model's `pad_id` ({model.pad_id}) must be the tokenizer's "
            f"({tokenizer.pad_id}): the ids are padded with the tokenizer's pad id."
        )
    num_classes = model.num_classes

    def classify(sentences):
        ids = tokenize_for_classification(tokenizer, sentences, max_length, head_fraction)

        def run():
            logits = model(ids.to_tensor(default_value=tokenizer.pad_id), training=False)
            return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)

        # An empty batch gives a `(0, 0)` id matrix; skip the model rather than rely on
        # every layer accepting zero-length sequences.
        probabilities = tf.cond(
            ids.nrows() > 0, run, lambda: tf.zeros([0, num_classes], tf.float32)
        )
        labels = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"label": labels, "probabilities": probabilities}

    return classify
