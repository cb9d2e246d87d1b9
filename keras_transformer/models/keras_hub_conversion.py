"""Converting a keras-hub BERT-family backbone into this library's encoder models."""

import dataclasses

import keras
import numpy as np

from keras_transformer import sublayer_names as names
from keras_transformer.layers.activations import gelu_approximate
from keras_transformer.models.masked_lm import MaskedLM
from keras_transformer.models.transformer_classifier import TransformerClassifier


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where a keras-hub backbone keeps its embedding weights (variable paths)."""

    token: str
    position: str
    segment: str | None
    pad_id: int
    # Weights with no counterpart in our encoder, dropped on purpose.
    dropped: tuple = ()


# Keyed by class name because keras-hub is imported only when converting. The transformer
# blocks are laid out alike in all three (`transformer_layer_{i}/...`, see `_weight_pairs`).
_LAYOUTS = {
    "BertBackbone": _Layout(
        token="token_embedding/embeddings",
        position="position_embedding/embeddings",
        segment="segment_embedding/embeddings",
        pad_id=0,
        dropped=("pooled_dense/kernel", "pooled_dense/bias"),
    ),
    "DistilBertBackbone": _Layout(
        token="token_and_position_embedding/token_embedding/embeddings",
        position="token_and_position_embedding/position_embedding/embeddings",
        segment=None,
        pad_id=0,
    ),
    "RobertaBackbone": _Layout(
        token="embeddings/token_embedding/embeddings",
        position="embeddings/position_embedding/embeddings",
        segment=None,
        pad_id=1,
    ),
}

# Our block's sub-layer -> keras-hub `TransformerEncoder`'s, with the weights each holds.
_BLOCK_SUBLAYERS = (
    *(
        (
            f"{names.SELF_ATTENTION}/{projection}",
            f"self_attention_layer/{projection}",
            ("kernel", "bias"),
        )
        for projection in names.ATTENTION_PROJECTIONS
    ),
    (names.SELF_ATTENTION_LAYER_NORM, "self_attention_layer_norm", ("gamma", "beta")),
    (
        f"{names.FEED_FORWARD}/{names.INTERMEDIATE_DENSE}",
        "feedforward_intermediate_dense",
        ("kernel", "bias"),
    ),
    (f"{names.FEED_FORWARD}/{names.OUTPUT_DENSE}", "feedforward_output_dense", ("kernel", "bias")),
    (names.FEED_FORWARD_LAYER_NORM, "feedforward_layer_norm", ("gamma", "beta")),
)

_POSITION_TABLE = "embedding/position_embedding/embeddings"


def from_keras_hub(backbone, num_classes=None, pooling="cls", pad_id=None, **kwargs):
    """Converts a keras-hub BERT, DistilBERT or RoBERTa backbone into our encoder models.

    With `num_classes`, returns a
    [`TransformerClassifier`][keras_transformer.models.TransformerClassifier] for
    fine-tuning: the backbone's encoder and a new, randomly initialised dense head.
    With `num_classes=None`, returns a
    [`MaskedLM`][keras_transformer.models.MaskedLM] holding the backbone's encoder
    and a new masked-language-model head. A backbone carries no MLM head (keras-hub
    keeps it in its `BertMaskedLM` task), so that model's logits mean nothing until
    trained: use it to continue pretraining on your own text, or take its `encoder`
    as a feature extractor, or pass it to `TransformerClassifier`'s
    [`from_encoder`][keras_transformer.models.TransformerClassifier.from_encoder] later.

    In both, `model.encoder(token_ids)` computes the backbone's
    `sequence_output` at every non-pad position (within float32 rounding):

    - token embeddings, not scaled by √d (`scale_embeddings=False`);
    - learned positions (`position="learned"`), `max_sequence_length` the
      backbone's;
    - BERT's segment embedding: row 0 of the segment table is added to every
      row of the position table. This is exact for single-segment input
      (`segment_ids` all 0). Sentence pairs (segment 1 after the first
      `[SEP]`) are not supported: their second segment would get segment 0's
      embedding. DistilBERT and RoBERTa have no segments;
    - the embedding layer normalization (`embedding_layer_norm=True`) and
      post-norm blocks, with the backbone's epsilon (BERT, DistilBERT
      1e-12; RoBERTa 1e-5);
    - the feed-forward activation: BERT's tanh-approximated GELU
      ([`keras_transformer.layers.gelu_approximate`][]), DistilBERT's and
      RoBERTa's exact `"gelu"`;
    - padding: keras-hub takes a `padding_mask` input; our models mask the
      positions where `token_ids == pad_id`, which is the same whenever that
      mask was `token_ids != pad_id` (as keras-hub's preprocessors make it).
      Hidden states at pad positions differ; nothing reads them.

    The head differs from keras-hub's `BertTextClassifier`: BERT's
    `pooled_dense` (a tanh layer on `[CLS]`, trained for next-sentence
    prediction) is dropped, and the new dense head reads the `[CLS]` state
    itself (`pooling="cls"`).

    The weights are copied by name, each of our encoder's variables from
    its counterpart in the backbone. A variable missing on either side, or
    one not accounted for, raises a `ValueError` rather than being skipped,
    so a change of layout in keras-hub or here fails loudly.

    Args:
        backbone: a `keras_hub.models.BertBackbone`, `DistilBertBackbone` or
            `RobertaBackbone` (exactly these classes; a task such as
            `BertTextClassifier` converts through its `.backbone`).
        num_classes: int, classes of the new classification head, or `None`
            for a `MaskedLM`. Defaults to `None`.
        pooling: `"cls"` (the first token's state, BERT's choice) or
            `"mean"`; only with `num_classes`. Defaults to `"cls"`.
        pad_id: int, the tokenizer's padding id (`tokenizer.pad_token_id`).
            Defaults to `None`: 0 (`[PAD]`) for BERT and DistilBERT, 1
            (`<pad>`) for RoBERTa, as in their keras-hub vocabularies.
        **kwargs: other arguments of the returned model: dropout rates
            (default: the backbone's `dropout` for `dropout` and
            `attention_dropout`, as keras-hub applies it to both; no
            `activation_dropout`), `name`, `dtype` (default: the backbone's
            dtype policy). An encoder size or setting given here must equal
            the one derived from the backbone.

    Returns:
        A `TransformerClassifier` (with `num_classes`) or a `MaskedLM`.

    Raises:
        ValueError: for an unsupported backbone, a backbone whose layers are
            not laid out as expected, or `kwargs` contradicting the backbone.

    Example:

    A BERT backbone with random weights, converted; the classifier's encoder
    computes the backbone's `sequence_output` at the real tokens:

    >>> import keras_hub
    >>> import numpy as np
    >>> from keras_transformer.models import from_keras_hub
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=32, max_sequence_length=16)
    >>> classifier = from_keras_hub(backbone, num_classes=2)
    >>> type(classifier).__name__, classifier.pooling
    ('TransformerClassifier', 'cls')
    >>> token_ids = np.array([[2, 15, 16, 3, 0, 0]], "int32")
    >>> tuple(classifier(token_ids).shape)
    (1, 2)
    >>> theirs = backbone({"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
    ...                    "padding_mask": token_ids != 0})["sequence_output"]
    >>> ours = classifier.encoder(token_ids)
    >>> difference = keras.ops.abs(theirs - ours)[:, :4]  # the 4 real tokens
    >>> bool(keras.ops.max(difference) < 1e-5)
    True

    A pretrained model, online (downloads a preset; keras-hub's tokenizer does not add special
    tokens, a `StartEndPacker` lays the ids out as `[CLS] … [SEP] [PAD]…`,
    so `pooling="cls"` reads the `[CLS]` state):

    ```python
    import keras
    import keras_hub
    from keras_transformer.models import from_keras_hub

    backbone = keras_hub.models.BertBackbone.from_preset("bert_tiny_en_uncased")
    tokenizer = keras_hub.models.BertTokenizer.from_preset("bert_tiny_en_uncased")
    packer = keras_hub.layers.StartEndPacker(
        sequence_length=128,
        start_value=tokenizer.cls_token_id,
        end_value=tokenizer.sep_token_id,
        pad_value=tokenizer.pad_token_id,
    )
    classifier = from_keras_hub(backbone, num_classes=2, pad_id=tokenizer.pad_token_id)
    token_ids = packer(tokenizer(["a gripping film", "two dull hours"]))
    classifier.compile(
        optimizer=keras.optimizers.AdamW(2e-5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    classifier.fit(token_ids, keras.ops.convert_to_tensor([1, 0]), epochs=1)
    ```

    References:
        - [Devlin et al., 2019](https://arxiv.org/abs/1810.04805), "BERT:
          Pre-training of Deep Bidirectional Transformers for Language
          Understanding", section 3 and figure 2 (the input embeddings).
        - [Sanh et al., 2019](https://arxiv.org/abs/1910.01108), "DistilBERT,
          a distilled version of BERT".
        - [Liu et al., 2019](https://arxiv.org/abs/1907.11692), "RoBERTa: A
          Robustly Optimized BERT Pretraining Approach".
    """
    import keras_hub  # Optional dependency (the `text` and `dev` extras).

    layout = _layout_of(backbone, keras_hub)
    if num_classes is None and pooling != "cls":
        raise ValueError(
            f"`pooling` applies to the classifier's head only, but `num_classes` is None (a "
            f"MaskedLM is returned). Received: pooling={pooling!r}. Pass `num_classes` or drop "
            "`pooling`."
        )
    activation, epsilon = _block_settings(backbone)
    arguments = {
        "vocabulary_size": backbone.vocabulary_size,
        "num_layers": backbone.num_layers,
        "hidden_dim": backbone.hidden_dim,
        "num_heads": backbone.num_heads,
        "intermediate_dim": backbone.intermediate_dim,
        "max_sequence_length": backbone.max_sequence_length,
        "position": "learned",
        "norm_first": False,
        "activation": activation,
        "layer_norm_epsilon": epsilon,
        "scale_embeddings": False,
        "embedding_layer_norm": True,
    }
    for name, value in kwargs.items():
        if name in arguments and value != arguments[name]:
            raise ValueError(
                f"`{name}` is fixed by the {type(backbone).__name__} ({arguments[name]!r}). "
                f"Received: {name}={value!r}. Remove it, or build the model from scratch to "
                "change the architecture."
            )
    arguments["pad_id"] = layout.pad_id if pad_id is None else pad_id
    arguments.update(
        dropout=backbone.dropout,
        attention_dropout=backbone.dropout,
        activation_dropout=0.0,
        dtype=backbone.dtype_policy,
    )
    arguments.update(kwargs)
    if num_classes is None:
        model = MaskedLM(**arguments)
    else:
        model = TransformerClassifier(num_classes=num_classes, pooling=pooling, **arguments)
    _copy_weights(backbone, model.encoder, layout)
    return model


def _layout_of(backbone, keras_hub):
    for class_name, layout in _LAYOUTS.items():
        # The exact class: a subclass may compute something else with the same weights.
        if type(backbone) is getattr(keras_hub.models, class_name, None):
            return layout
    supported = ", ".join(f"`keras_hub.models.{name}`" for name in _LAYOUTS)
    hint = ""
    if type(getattr(backbone, "backbone", None)).__name__ in _LAYOUTS:
        hint = " This looks like a keras-hub task: pass its `.backbone`."
    raise ValueError(
        f"`backbone` must be one of {supported}. Received: a {type(backbone).__name__}.{hint}"
    )


def _block_settings(backbone):
    """The activation and the layer-norm epsilon, read from the backbone and checked."""
    name = type(backbone).__name__
    blocks = backbone.transformer_layers
    epsilons = {backbone.embeddings_layer_norm.epsilon} | {b.layer_norm_epsilon for b in blocks}
    if len(epsilons) != 1:
        raise ValueError(
            f"The {name}'s layer normalizations use different epsilons ({sorted(epsilons)}); "
            "our encoder has one `layer_norm_epsilon` for all of them, so it cannot match."
        )
    if any(block.normalize_first for block in blocks):
        raise ValueError(
            f"The {name} has pre-norm blocks (`normalize_first=True`); the conversion "
            "expects BERT's post-norm blocks."
        )
    # keras-hub passes its own `gelu_approximate` function for BERT, Keras' exact "gelu" else.
    names = {getattr(block.activation, "__name__", repr(block.activation)) for block in blocks}
    activations = {"gelu_approximate": gelu_approximate, "gelu": "gelu"}
    if len(names) != 1 or next(iter(names)) not in activations:
        raise ValueError(
            f"The {name}'s feed-forward activation is {sorted(names)}; the conversion knows "
            f"{sorted(activations)}."
        )
    return activations[names.pop()], epsilons.pop()


def _weight_pairs(layout, num_layers):
    """Our encoder's variable paths -> the backbone's, the position table aside."""
    pairs = {
        "embedding/token_embedding/embeddings": layout.token,
        "embedding/embedding_layer_norm/gamma": "embeddings_layer_norm/gamma",
        "embedding/embedding_layer_norm/beta": "embeddings_layer_norm/beta",
    }
    for i in range(num_layers):
        for ours, theirs, weights in _BLOCK_SUBLAYERS:
            for weight in weights:
                ours_path = f"transformer_encoder/block_{i}/{ours}/{weight}"
                pairs[ours_path] = f"transformer_layer_{i}/{theirs}/{weight}"
    return pairs


def _copy_weights(backbone, encoder, layout):
    name = type(backbone).__name__
    theirs = {variable.path: variable for variable in backbone.weights}
    ours = {variable.path: variable for variable in encoder.weights}
    pairs = _weight_pairs(layout, backbone.num_layers)

    expected_ours = set(pairs) | {_POSITION_TABLE}
    if set(ours) != expected_ours:
        raise ValueError(
            "The conversion's weight table no longer matches our encoder: unmapped "
            f"{sorted(set(ours) - expected_ours)}, absent {sorted(expected_ours - set(ours))}. "
            "Update `_weight_pairs` in keras_hub_conversion.py."
        )
    used = set(pairs.values()) | {layout.position} | ({layout.segment} - {None})
    missing = sorted(used - set(theirs))
    unexpected = sorted(set(theirs) - used - set(layout.dropped))
    if missing or unexpected:
        raise ValueError(
            f"The {name}'s weights are not laid out as the conversion expects (keras-hub "
            f"changed?): missing {missing}, not accounted for {unexpected}."
        )

    def value(path):
        return np.asarray(keras.ops.convert_to_numpy(theirs[path]), dtype="float32")

    values = {ours_path: value(theirs_path) for ours_path, theirs_path in pairs.items()}
    positions = value(layout.position)
    if layout.segment is not None:
        # Every token of single-segment input adds segment 0's vector: fold it into each position.
        positions = positions + value(layout.segment)[0]
    values[_POSITION_TABLE] = positions
    for path, array in values.items():
        if tuple(ours[path].shape) != array.shape:
            raise ValueError(
                f"Shape mismatch copying the {name}'s weights into `{path}`: "
                f"{array.shape} in the backbone, {tuple(ours[path].shape)} in our encoder."
            )
        ours[path].assign(array)
