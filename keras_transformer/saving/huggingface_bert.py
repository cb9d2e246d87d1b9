"""BERT ↔ our encoder models (`MaskedLM`, `TransformerClassifier`).

BERT is our post-norm encoder with learned positions, token-type embeddings
(`num_token_types`), a layer normalization of the embedding sum
(`embedding_layer_norm`), no √d scaling and its own layer-norm epsilon (1e-12).
`BertForMaskedLM`'s head is `MaskedLM`'s; `BertForSequenceClassification`'s
pooler is `TransformerClassifier(pooling="pooler")`.
"""

import numpy as np

from keras_transformer.models.masked_lm import MaskedLM
from keras_transformer.models.transformer_classifier import TransformerClassifier
from keras_transformer.saving import checkpoint_tensors as ct
from keras_transformer.saving.huggingface_config import (
    activation_from,
    activation_name,
    check_values,
    learned_embedding_problems,
    refuse,
    refuse_options,
)

MODEL_TYPE = "bert"
ARCHITECTURES = ("BertModel", "BertForMaskedLM", "BertForSequenceClassification")
IGNORED = ("embeddings.position_ids",)


def check_config(config, path, architecture):
    """Refuses `config.json`'s sizes, rates and ids that no model can be built with, by key."""
    check_values(
        config,
        path,
        architecture,
        sizes=(
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
        ),
        optional_sizes=("type_vocab_size", "num_labels"),
        heads=(("hidden_size", "num_attention_heads"),),
        epsilons=("layer_norm_eps",),
        rates=("hidden_dropout_prob", "attention_probs_dropout_prob"),
        token_ids=("pad_token_id",),
    )


def prefix_of(names):
    """`"bert."` for the task models' files, `""` for `BertModel`'s."""
    return "bert." if any(name.startswith("bert.") for name in names) else ""


def sizes(config, shapes, architecture):
    """The config's sizes and the tensors that hold them, for `checkpoint_tensors.check_sizes`."""
    prefix = prefix_of(shapes)
    words = (f"{prefix}embeddings.word_embeddings.weight", "cls.predictions.decoder.weight")
    checks = [
        ct.LayerCount("num_hidden_layers", config["num_hidden_layers"], f"{prefix}encoder.layer."),
        ct.Size("vocab_size", config["vocab_size"], words, 0),
        ct.Size("hidden_size", config["hidden_size"], words, 1),
        ct.Size(
            "max_position_embeddings",
            config["max_position_embeddings"],
            (f"{prefix}embeddings.position_embeddings.weight",),
            0,
        ),
        ct.Size(
            "intermediate_size",
            config["intermediate_size"],
            ct.per_layer(shapes, f"{prefix}encoder.layer.", ".intermediate.dense.weight"),
            0,
        ),
    ]
    token_types = config.get("type_vocab_size", 2)
    if token_types is not None:
        name = f"{prefix}embeddings.token_type_embeddings.weight"
        checks.append(ct.Size("type_vocab_size", token_types, (name,), 0))
    if architecture == "BertForSequenceClassification":
        key, num_classes = _num_classes(config)
        checks.append(ct.Size(key, num_classes, ("classifier.weight",), 0))
    return checks


def _num_classes(config):
    """`(key, number)`: transformers writes `id2label` alone, older files `num_labels` too."""
    if config.get("num_labels"):
        return "num_labels", config["num_labels"]
    labels = config.get("id2label") or {}
    return "id2label", len(labels) or 2


def model_from_config(config, architecture, source):
    """A `MaskedLM` (or `TransformerClassifier`) with the checkpoint's architecture."""
    problems = []
    if config.get("position_embedding_type", "absolute") != "absolute":
        problems.append(f"position_embedding_type={config['position_embedding_type']!r}")
    if config.get("is_decoder", False) or config.get("add_cross_attention", False):
        problems.append("a BERT decoder (is_decoder / add_cross_attention)")
    if architecture == "BertForMaskedLM" and config.get("hidden_act", "gelu") != "gelu":
        problems.append(f"hidden_act={config['hidden_act']!r} in the masked-LM head (ours: gelu)")
    refuse(source, problems)
    arguments = dict(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        hidden_dim=config["hidden_size"],
        num_heads=config["num_attention_heads"],
        intermediate_dim=config["intermediate_size"],
        dropout=config.get("hidden_dropout_prob", 0.1),
        attention_dropout=config.get("attention_probs_dropout_prob", 0.1),
        max_sequence_length=config["max_position_embeddings"],
        position="learned",
        norm_first=False,
        pad_id=config.get("pad_token_id") or 0,
        activation=activation_from(config, "hidden_act", source),
        layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),
        scale_embeddings=False,
        embedding_layer_norm=True,
        num_token_types=config.get("type_vocab_size", 2),
    )
    if architecture == "BertForSequenceClassification":
        _, num_classes = _num_classes(config)
        return TransformerClassifier(num_classes=num_classes, pooling="pooler", **arguments)
    return MaskedLM(**arguments)


def tensors(model, prefix, architecture=None):
    """The checkpoint's tensors and the variables they fill.

    Args:
        model: a `MaskedLM` or `TransformerClassifier`.
        prefix: `"bert."` for the task models' files, `""` for `BertModel`'s.
        architecture: the checkpoint's class. `"BertModel"` leaves `MaskedLM`'s
            head out (that file has none).
    """
    embedding = model.encoder.get_layer("embedding")
    tied = ("cls.predictions.decoder.weight",) if isinstance(model, MaskedLM) else ()
    entries = [
        _renamed(ct.same(f"{prefix}embeddings.word_embeddings.weight", embedding.embeddings), tied),
        ct.same(
            f"{prefix}embeddings.position_embeddings.weight",
            embedding.position_embedding.position_embeddings,
        ),
        _token_types(f"{prefix}embeddings.token_type_embeddings.weight", model, embedding),
        *ct.layer_norm(f"{prefix}embeddings.LayerNorm", embedding.embedding_layer_norm),
    ]
    stack = model.encoder.get_layer("transformer_encoder")
    for i, block in enumerate(stack.blocks):
        layer = f"{prefix}encoder.layer.{i}"
        attention = block.self_attention
        for name, dense in (
            ("attention.self.query", attention.query_dense),
            ("attention.self.key", attention.key_dense),
            ("attention.self.value", attention.value_dense),
            ("attention.output.dense", attention.output_dense),
            ("intermediate.dense", block.feed_forward.intermediate_dense),
            ("output.dense", block.feed_forward.output_dense),
        ):
            entries += ct.dense(f"{layer}.{name}", dense)
        for name, norm in (
            ("attention.output.LayerNorm", block.self_attention_layer_norm),
            ("output.LayerNorm", block.feed_forward_layer_norm),
        ):
            entries += ct.layer_norm(f"{layer}.{name}", norm)
    if isinstance(model, MaskedLM) and architecture != "BertModel":
        entries += ct.dense("cls.predictions.transform.dense", model.head_dense)
        entries += ct.layer_norm("cls.predictions.transform.LayerNorm", model.head_layer_norm)
        logits_bias = ct.same("cls.predictions.bias", model.output_bias)
        entries.append(_renamed(logits_bias, ("cls.predictions.decoder.bias",)))
    if isinstance(model, TransformerClassifier):
        entries += ct.dense(f"{prefix}pooler.dense", model.pooler_dense)
        entries += ct.dense("classifier", model.classifier_head)
    return entries


def _renamed(entry, aliases):
    entry.aliases = aliases
    return entry


def _token_types(name, model, embedding):
    """The token-type table; a model without one writes a single zero row (type 0 adds nothing)."""
    if embedding.token_type_embedding is not None:
        return ct.same(name, embedding.token_type_embedding.embeddings)
    width = model.hidden_dim
    return ct.Tensor(name, (1, width), [], lambda a: [], lambda values: np.zeros((1, width)))


def config_from_model(model):
    """`(config, architecture)` of a BERT checkpoint for `model`, or a refusal."""
    if isinstance(model, TransformerClassifier):
        architecture = "BertForSequenceClassification"
    elif type(model) is MaskedLM:
        architecture = "BertForMaskedLM"
    else:
        raise ValueError(
            f"BERT holds a MaskedLM or a TransformerClassifier, not a {type(model).__name__}."
        )
    problems = []
    if model.norm_first:
        problems.append("`norm_first=True` (BERT is post-norm)")
    problems += learned_embedding_problems(model, "BERT")
    if not model.embedding_layer_norm:
        problems.append("`embedding_layer_norm=False` (BERT normalizes the embeddings)")
    if architecture == "BertForSequenceClassification" and model.pooling != "pooler":
        problems.append(f'`pooling={model.pooling!r}` (BERT: "pooler")')
    refuse_options(model, problems)
    config = {
        "architectures": [architecture],
        "model_type": MODEL_TYPE,
        "vocab_size": model.vocabulary_size,
        "hidden_size": model.hidden_dim,
        "num_hidden_layers": model.num_layers,
        "num_attention_heads": model.num_heads,
        "intermediate_size": model.intermediate_dim,
        "hidden_act": activation_name(model),
        "hidden_dropout_prob": model.dropout,
        "attention_probs_dropout_prob": model.attention_dropout,
        "max_position_embeddings": model.max_sequence_length,
        "type_vocab_size": model.num_token_types or 1,
        "layer_norm_eps": model.layer_norm_epsilon,
        "pad_token_id": model.pad_id,
        "position_embedding_type": "absolute",
    }
    if architecture == "BertForSequenceClassification":
        config["num_labels"] = model.num_classes
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(model.num_classes)}
        config["label2id"] = {f"LABEL_{i}": i for i in range(model.num_classes)}
    return config, architecture
