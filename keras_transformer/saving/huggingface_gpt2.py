"""GPT-2 ↔ `TransformerLM`.

GPT-2 is our pre-norm decoder-only model with learned positions, no √d
scaling, tied output embeddings and the tanh GELU. Its `Conv1D` layers store
their weights `(in, out)`, as Keras's kernels, and its attention keeps the
query, key and value projections in one matrix (`c_attn`), which is split here.
"""

import numpy as np

from keras_transformer.models.transformer_lm import TransformerLM
from keras_transformer.saving import checkpoint_tensors as ct
from keras_transformer.saving.huggingface_config import (
    activation_from,
    activation_name,
    attention_variant_problems,
    check_values,
    learned_embedding_problems,
    refuse,
    refuse_options,
)

MODEL_TYPE = "gpt2"
ARCHITECTURES = ("GPT2LMHeadModel", "GPT2Model")
# The causal-mask buffers of older files.
IGNORED = ("attn.bias", "attn.masked_bias")


def check_config(config, path, architecture):
    """Refuses `config.json`'s sizes, rates and ids that no model can be built with, by key."""
    check_values(
        config,
        path,
        architecture,
        sizes=("vocab_size", "n_embd", "n_layer", "n_head", "n_positions"),
        optional_sizes=("n_inner",),
        heads=(("n_embd", "n_head"),),
        epsilons=("layer_norm_epsilon",),
        rates=("resid_pdrop", "attn_pdrop"),
        token_ids=("eos_token_id", "pad_token_id"),
    )


def prefix_of(names):
    """`"transformer."` for `GPT2LMHeadModel`'s files, `""` for `GPT2Model`'s."""
    return "transformer." if any(name.startswith("transformer.") for name in names) else ""


def sizes(config, shapes, architecture):
    """The config's sizes and the tensors that hold them, for `checkpoint_tensors.check_sizes`."""
    prefix = prefix_of(shapes)
    words = (f"{prefix}wte.weight", "lm_head.weight")
    inner = config.get("n_inner")
    stated = None if inner else f"null (4 × `n_embd`: {4 * config['n_embd']})"
    return [
        ct.LayerCount("n_layer", config["n_layer"], f"{prefix}h."),
        ct.Size("vocab_size", config["vocab_size"], words, 0),
        ct.Size("n_embd", config["n_embd"], words[:1], 1),
        ct.Size("n_positions", config["n_positions"], (f"{prefix}wpe.weight",), 0),
        ct.Size(
            "n_inner",
            inner or 4 * config["n_embd"],
            ct.per_layer(shapes, f"{prefix}h.", ".mlp.c_fc.weight"),
            1,
            stated=stated,
        ),
    ]


def model_from_config(config, source):
    """A `TransformerLM` with the checkpoint's architecture (weights not set)."""
    problems = []
    if not config.get("scale_attn_weights", True):
        problems.append("scale_attn_weights=False")
    if config.get("scale_attn_by_inverse_layer_idx", False):
        problems.append("scale_attn_by_inverse_layer_idx=True")
    if config.get("add_cross_attention", False):
        problems.append("add_cross_attention=True")
    refuse(source, problems)
    hidden_dim = config["n_embd"]
    end_id = config.get("eos_token_id")
    # GPT-2 has no pad token: rows are padded with the end token, which the model masks.
    pad_id = config.get("pad_token_id")
    pad_id = end_id if pad_id is None else pad_id
    return TransformerLM(
        vocabulary_size=config["vocab_size"],
        num_layers=config["n_layer"],
        hidden_dim=hidden_dim,
        num_heads=config["n_head"],
        intermediate_dim=config.get("n_inner") or 4 * hidden_dim,
        dropout=config.get("resid_pdrop", 0.1),
        attention_dropout=config.get("attn_pdrop", 0.1),
        max_sequence_length=config["n_positions"],
        position="learned",
        norm_first=True,
        tie_output_embeddings=config.get("tie_word_embeddings", True),
        pad_id=0 if pad_id is None else pad_id,
        activation=activation_from(config, "activation_function", source),
        layer_norm_epsilon=config.get("layer_norm_epsilon", 1e-5),
        scale_embeddings=False,
        end_id=end_id,
    )


def tensors(model, prefix):
    """The checkpoint's tensors and the variables they fill (`prefix`: `"transformer."` or `""`)."""
    embedding = model.embedding
    tied = ("lm_head.weight",) if model.tie_output_embeddings else ()
    token = ct.same(f"{prefix}wte.weight", embedding.embeddings)
    token.aliases = tied
    entries = [
        token,
        ct.same(f"{prefix}wpe.weight", embedding.position_embedding.position_embeddings),
    ]
    for i, block in enumerate(model.decoder.blocks):
        layer = f"{prefix}h.{i}"
        attention = block.self_attention
        entries += ct.layer_norm(f"{layer}.ln_1", block.self_attention_layer_norm)
        entries += _fused_qkv(f"{layer}.attn.c_attn", attention)
        entries += _conv1d(f"{layer}.attn.c_proj", attention.output_dense)
        entries += ct.layer_norm(f"{layer}.ln_2", block.feed_forward_layer_norm)
        entries += _conv1d(f"{layer}.mlp.c_fc", block.feed_forward.intermediate_dense)
        entries += _conv1d(f"{layer}.mlp.c_proj", block.feed_forward.output_dense)
    entries += ct.layer_norm(f"{prefix}ln_f", model.decoder.final_layer_norm)
    if model.output_projection is not None:
        entries.append(ct.linear("lm_head.weight", model.output_projection))
    return entries


def _conv1d(prefix, dense):
    """GPT-2's `Conv1D`: a weight `(in, out)`, Keras's layout, heads flattened."""
    kernel, bias = dense.kernel, dense.bias
    kernel_shape, bias_shape = tuple(kernel.shape), tuple(bias.shape)
    rows = kernel_shape[0] * kernel_shape[1] if len(kernel_shape) == 3 else kernel_shape[0]
    columns = int(np.prod(kernel_shape)) // rows
    return [
        ct.Tensor(
            f"{prefix}.weight",
            (rows, columns),
            [kernel],
            lambda a: [a.reshape(kernel_shape)],
            lambda values: values[0].reshape(rows, columns),
        ),
        ct.Tensor(
            f"{prefix}.bias",
            (int(np.prod(bias_shape)),),
            [bias],
            lambda a: [a.reshape(bias_shape)],
            lambda values: values[0].reshape(-1),
        ),
    ]


def _fused_qkv(prefix, attention):
    """`c_attn`: the query, key and value kernels side by side, `(width, 3 * width)`."""
    denses = (attention.query_dense, attention.key_dense, attention.value_dense)
    kernels = [dense.kernel for dense in denses]
    biases = [dense.bias for dense in denses]
    width = kernels[0].shape[0]
    shapes = [tuple(k.shape) for k in kernels]
    bias_shapes = [tuple(b.shape) for b in biases]
    sizes = [int(np.prod(shape[1:])) for shape in shapes]
    splits = np.cumsum(sizes)[:-1]

    def kernels_to_ours(array):
        return [part.reshape(shape) for part, shape in zip(np.split(array, splits, 1), shapes)]

    def biases_to_ours(array):
        return [part.reshape(shape) for part, shape in zip(np.split(array, splits), bias_shapes)]

    return [
        ct.Tensor(
            f"{prefix}.weight",
            (width, sum(sizes)),
            kernels,
            kernels_to_ours,
            lambda values: np.concatenate([v.reshape(width, -1) for v in values], axis=1),
        ),
        ct.Tensor(
            f"{prefix}.bias",
            (sum(sizes),),
            biases,
            biases_to_ours,
            lambda values: np.concatenate([v.reshape(-1) for v in values]),
        ),
    ]


def config_from_model(model):
    """`(config, generation_config)` of `GPT2LMHeadModel` for `model`, or a refusal."""
    if not isinstance(model, TransformerLM):
        raise ValueError(f"GPT-2 holds a TransformerLM, not a {type(model).__name__}.")
    problems = []
    if not model.norm_first:
        problems.append("`norm_first=False` (GPT-2 is pre-norm)")
    problems += learned_embedding_problems(model, "GPT-2")
    if not model.tie_output_embeddings:
        problems.append("`tie_output_embeddings=False` (GPT-2 ties them)")
    problems += attention_variant_problems(model, "GPT-2")
    refuse_options(model, problems)
    end_id = model.pad_id if model.end_id is None else model.end_id
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": MODEL_TYPE,
        "vocab_size": model.vocabulary_size,
        "n_embd": model.hidden_dim,
        "n_layer": model.num_layers,
        "n_head": model.num_heads,
        "n_inner": model.intermediate_dim,
        "n_positions": model.max_sequence_length,
        "activation_function": activation_name(model),
        "layer_norm_epsilon": model.layer_norm_epsilon,
        "resid_pdrop": model.dropout,
        "embd_pdrop": model.dropout,
        "attn_pdrop": model.attention_dropout,
        "bos_token_id": end_id,
        "eos_token_id": end_id,
        "tie_word_embeddings": True,
    }
    if model.pad_id != end_id:
        config["pad_token_id"] = model.pad_id
    generation = {"bos_token_id": end_id, "eos_token_id": end_id}
    return config, generation
