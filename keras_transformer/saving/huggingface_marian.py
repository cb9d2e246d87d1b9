"""MarianMT (the opus-mt translation models) ↔ `Seq2SeqTransformer`.

Marian is the paper's base Transformer with these choices, each an option of
`Seq2SeqTransformer`: post-norm blocks with layer-norm epsilon 1e-5, sines then
cosines in the position table (`interleave_sinusoids=False`), embeddings ×√d
(`scale_embedding`), a bias on the logits (`final_logits_bias`), the pad token
as the decoder's start token with a zero embedding (`zero_pad_embedding`).
"""

import numpy as np

from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer
from keras_transformer.saving import checkpoint_tensors as ct
from keras_transformer.saving.huggingface_config import (
    activation_from,
    activation_name,
    attention_variant_problems,
    check_values,
    refuse,
    refuse_options,
)

MODEL_TYPE = "marian"
ARCHITECTURES = ("MarianMTModel",)
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which Marian does not change
# Recomputed by transformers on load; older files hold them.
IGNORED = ("embed_positions.weight",)


def check_config(config, path, architecture):
    """Refuses `config.json`'s sizes, rates and ids that no model can be built with, by key."""
    shared = config.get("share_encoder_decoder_embeddings", True)
    check_values(
        config,
        path,
        architecture,
        sizes=(
            "vocab_size",
            "d_model",
            "encoder_layers",
            "decoder_layers",
            "encoder_attention_heads",
            "encoder_ffn_dim",
        )
        + (() if shared else ("decoder_vocab_size",)),
        # The decoder's must equal the encoder's, which `model_from_config` checks.
        optional_sizes=("decoder_attention_heads", "decoder_ffn_dim", "max_position_embeddings"),
        heads=(("d_model", "encoder_attention_heads"),),
        rates=("dropout", "attention_dropout", "activation_dropout"),
        token_ids=("pad_token_id", "eos_token_id", "decoder_start_token_id"),
    )


def sizes(config, shapes, architecture):
    """The config's sizes and the tensors that hold them, for `checkpoint_tensors.check_sizes`."""
    encoder_words = ("model.encoder.embed_tokens.weight",)
    decoder_words = ("model.decoder.embed_tokens.weight", "lm_head.weight")
    if config.get("share_encoder_decoder_embeddings", True):
        encoder_words = ("model.shared.weight", *encoder_words, *decoder_words)
        target = []
    else:
        target = [ct.Size("decoder_vocab_size", config["decoder_vocab_size"], decoder_words, 0)]
    checks = [
        ct.LayerCount("encoder_layers", config["encoder_layers"], "model.encoder.layers."),
        ct.LayerCount("decoder_layers", config["decoder_layers"], "model.decoder.layers."),
        ct.Size("vocab_size", config["vocab_size"], encoder_words, 0),
        *target,
        ct.Size("d_model", config["d_model"], encoder_words, 1),
    ]
    for side in ("encoder", "decoder"):
        key = f"{side}_ffn_dim"
        if config.get(key) is not None:
            names = ct.per_layer(shapes, f"model.{side}.layers.", ".fc1.weight")
            checks.append(ct.Size(key, config[key], names, 0))
    if config.get("max_position_embeddings") is not None:
        # Older files hold the sinusoidal tables that transformers now recomputes.
        names = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
        key = "max_position_embeddings"
        checks.append(ct.Size(key, config[key], names, 0, optional=True))
    return checks


def model_from_config(config, tensors, source):
    """A `Seq2SeqTransformer` with the checkpoint's architecture (weights not set)."""
    problems = []
    for ours in ("attention_heads", "ffn_dim"):
        encoder, decoder = config.get(f"encoder_{ours}"), config.get(f"decoder_{ours}")
        if encoder != decoder:
            problems.append(f"encoder_{ours}={encoder} and decoder_{ours}={decoder} differ")
    if config.get("normalize_before", False):
        problems.append("normalize_before=True (pre-norm Marian)")
    refuse(source, problems)
    share = config.get("share_encoder_decoder_embeddings", True)
    vocabulary_size = config["vocab_size"]
    target_vocabulary_size = vocabulary_size if share else config["decoder_vocab_size"]
    pad_id = config["pad_token_id"]
    # PyTorch keeps the pad row of an `nn.Embedding(padding_idx=...)` at zero; a checkpoint
    # whose row is not zero keeps its row here too.
    embedding = tensors.get("model.shared.weight", tensors.get("model.decoder.embed_tokens.weight"))
    zero_pad = embedding is not None and pad_id < len(embedding) and not np.any(embedding[pad_id])
    return Seq2SeqTransformer(
        source_vocabulary_size=vocabulary_size,
        target_vocabulary_size=target_vocabulary_size,
        num_encoder_layers=config["encoder_layers"],
        num_decoder_layers=config["decoder_layers"],
        hidden_dim=config["d_model"],
        num_heads=config["encoder_attention_heads"],
        intermediate_dim=config["encoder_ffn_dim"],
        dropout=config.get("dropout", 0.1),
        attention_dropout=config.get("attention_dropout", 0.0),
        activation_dropout=config.get("activation_dropout", 0.0),
        activation=activation_from(config, "activation_function", source),
        max_sequence_length=config.get("max_position_embeddings"),
        position="sinusoidal",
        interleave_sinusoids=False,
        norm_first=False,
        share_embeddings=share,
        tie_output_embeddings=config.get("tie_word_embeddings", True),
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        scale_embeddings=config.get("scale_embedding", False),
        output_bias=True,
        zero_pad_embedding=bool(zero_pad),
        pad_id=pad_id,
        start_id=config.get("decoder_start_token_id", pad_id),
        end_id=config["eos_token_id"],
    )


def tensors(model):
    """The checkpoint's tensors of `MarianMTModel` and the variables they fill."""
    entries = []
    source, target = model.source_embedding, model.target_embedding
    if model.share_embeddings:
        aliases = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
        if model.tie_output_embeddings:
            aliases += ("lm_head.weight",)
        entries.append(_embedding("model.shared.weight", source, aliases))
    else:
        entries.append(_embedding("model.encoder.embed_tokens.weight", source))
        aliases = ("lm_head.weight",) if model.tie_output_embeddings else ()
        entries.append(_embedding("model.decoder.embed_tokens.weight", target, aliases))
    for i, block in enumerate(model.encoder.blocks):
        entries += _block(f"model.encoder.layers.{i}", block)
    for i, block in enumerate(model.decoder.blocks):
        entries += _block(f"model.decoder.layers.{i}", block)
    entries.append(_logits_bias(model))
    if model.output_projection is not None:
        entries.append(ct.linear("lm_head.weight", model.output_projection))
    return entries


def _embedding(name, embedding, aliases=()):
    entry = ct.same(name, embedding.embeddings)
    entry.aliases = aliases
    return entry


def _block(prefix, block):
    entries = ct.attention(
        f"{prefix}.self_attn", block.self_attention, ("q_proj", "k_proj", "v_proj", "out_proj")
    )
    entries += ct.layer_norm(f"{prefix}.self_attn_layer_norm", block.self_attention_layer_norm)
    cross = getattr(block, "cross_attention_layer", None)
    if cross is not None:
        entries += ct.attention(
            f"{prefix}.encoder_attn", cross, ("q_proj", "k_proj", "v_proj", "out_proj")
        )
        entries += ct.layer_norm(
            f"{prefix}.encoder_attn_layer_norm", block.cross_attention_layer_norm
        )
    entries += ct.dense(f"{prefix}.fc1", block.feed_forward.intermediate_dense)
    entries += ct.dense(f"{prefix}.fc2", block.feed_forward.output_dense)
    entries += ct.layer_norm(f"{prefix}.final_layer_norm", block.feed_forward_layer_norm)
    return entries


def _logits_bias(model):
    """`final_logits_bias` `(1, vocabulary)`: our logits bias, plus an untied projection's bias.

    Marian's `lm_head` has no bias of its own; our untied `output_projection`
    (a `Dense`) has one, which adds to the logits just as `final_logits_bias`.
    """
    variables = [model.logits_bias] if model.logits_bias is not None else []
    if model.output_projection is not None:
        variables.append(model.output_projection.bias)
    size = model.target_vocabulary_size

    def to_ours(array):
        # Loading builds the model with `output_bias=True`: the bias goes there, the
        # projection's stays zero.
        return [array.reshape(-1)] + [np.zeros(size, "float32")] * (len(variables) - 1)

    def to_theirs(values):
        return np.sum([np.zeros(size, "float32"), *values], axis=0)[None, :]

    return ct.Tensor("final_logits_bias", (1, size), variables, to_ours, to_theirs, optional=True)


def config_from_model(model):
    """`(config, generation_config)` of `MarianMTModel` for `model`, or a refusal."""
    problems = []
    if not isinstance(model, Seq2SeqTransformer):
        raise ValueError(f"Marian holds a Seq2SeqTransformer, not a {type(model).__name__}.")
    if model.norm_first:
        problems.append("`norm_first=True` (Marian is post-norm)")
    if model.position != "sinusoidal" or model.interleave_sinusoids:
        problems.append(
            f"`position={model.position!r}`, `interleave_sinusoids={model.interleave_sinusoids}` "
            '(Marian: `position="sinusoidal"`, `interleave_sinusoids=False`)'
        )
    if model.layer_norm_epsilon != LAYER_NORM_EPSILON:
        problems.append(f"`layer_norm_epsilon={model.layer_norm_epsilon}` (Marian: 1e-5)")
    problems += attention_variant_problems(model, "Marian")
    refuse_options(model, problems)
    activation = activation_name(model)
    start_id = model.pad_id if model.start_id is None else model.start_id
    end_id = model.end_id
    if end_id is None:
        raise ValueError(
            "Marian's config needs the end token: build the model with `end_id=...` "
            "(the tokenizer's `end_id`)."
        )
    config = {
        "architectures": list(ARCHITECTURES),
        "model_type": MODEL_TYPE,
        "vocab_size": model.source_vocabulary_size,
        "decoder_vocab_size": model.target_vocabulary_size,
        "share_encoder_decoder_embeddings": model.share_embeddings,
        "tie_word_embeddings": model.tie_output_embeddings,
        "d_model": model.hidden_dim,
        "encoder_layers": model.num_encoder_layers,
        "decoder_layers": model.num_decoder_layers,
        "encoder_attention_heads": model.num_heads,
        "decoder_attention_heads": model.num_heads,
        "encoder_ffn_dim": model.intermediate_dim,
        "decoder_ffn_dim": model.intermediate_dim,
        "activation_function": activation,
        "dropout": model.dropout,
        "attention_dropout": model.attention_dropout,
        "activation_dropout": model.activation_dropout,
        "max_position_embeddings": model.max_sequence_length or 512,
        "scale_embedding": model.scale_embeddings,
        "pad_token_id": model.pad_id,
        "eos_token_id": end_id,
        # MarianConfig's default forces the end token at the last step; our search does not.
        "forced_eos_token_id": None,
        "decoder_start_token_id": start_id,
        "is_encoder_decoder": True,
    }
    generation = {
        "decoder_start_token_id": start_id,
        "eos_token_id": end_id,
        "pad_token_id": model.pad_id,
        # Our search never emits the pad token (it is the start token here).
        "bad_words_ids": [[model.pad_id]] if model.pad_id != end_id else None,
    }
    return config, {key: value for key, value in generation.items() if value is not None}
