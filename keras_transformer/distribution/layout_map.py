"""`get_layout_map`: how each weight of the models is split over a device mesh's model axis."""

import keras

from keras_transformer import sublayer_names as names
from keras_transformer.validation import is_int

# Megatron-style tensor parallelism (Shoeybi et al., 2019), written as regular expressions
# over the variables' paths (`LayoutMap` matches them with `re.fullmatch`). Attention is
# split by heads: the query, key and value kernels `(width, heads, head_dim)` on their heads
# axis and the output kernel `(heads, head_dim, width)` on its first, so each device
# computes whole heads and the block ends in one all-reduce. The feed-forward network is
# split the same way: the first kernel by columns, the second by rows.
# The gate of gated attention is shaped like the query projection and split the same way.
QUERY_KERNEL = rf".*attention/({names.QUERY}|{names.GATE})/kernel"
QUERY_BIAS = rf".*attention/({names.QUERY}|{names.GATE})/bias"
KEY_VALUE_KERNEL = rf".*attention/({names.KEY}|{names.VALUE})/kernel"
KEY_VALUE_BIAS = rf".*attention/({names.KEY}|{names.VALUE})/bias"
ATTENTION_OUTPUT_KERNEL = rf".*attention/{names.ATTENTION_OUTPUT}/kernel"
INTERMEDIATE_KERNEL = rf".*{names.FEED_FORWARD}/{names.INTERMEDIATE_DENSE}/kernel"
INTERMEDIATE_BIAS = rf".*{names.FEED_FORWARD}/{names.INTERMEDIATE_DENSE}/bias"
FEED_FORWARD_OUTPUT_KERNEL = rf".*{names.FEED_FORWARD}/{names.OUTPUT_DENSE}/kernel"
TOKEN_EMBEDDINGS = r".*token_embedding/embeddings"
OUTPUT_PROJECTION_KERNEL = r".*output_projection/kernel"
OUTPUT_PROJECTION_BIAS = r".*output_projection/bias"
MASKED_LM_OUTPUT_BIAS = r".*/output_bias"

VOCABULARY_KEYS = ("vocabulary_size", "source_vocabulary_size", "target_vocabulary_size")


def _required(config, key):
    value = config.get(key)
    if not is_int(value) or value < 1:
        raise ValueError(
            f"`config` needs `{key}` as a positive int. Received: {key}={value!r}. Pass the "
            "model's `get_config()` or the keyword arguments it is built with."
        )
    return value


def _divisors(value, devices):
    """The model axis sizes that split `value` evenly and fit a mesh of `devices`."""
    return [d for d in range(1, devices + 1) if value % d == 0 and devices % d == 0]


def _check_divides(name, value, shards, model_axis, total_devices):
    if value % shards:
        raise ValueError(
            f"`{name}`={value} cannot be split over the {shards} devices of mesh axis "
            f"'{model_axis}'. Use a model axis size that divides {value} (one of "
            f"{_divisors(value, max(total_devices, 1))}), or a `{name}` divisible by {shards}."
        )


def get_layout_map(device_mesh, config, model_axis="model"):
    """A `keras.distribution.LayoutMap` that shards a model's weights over `model_axis`.

    For [`Seq2SeqTransformer`][keras_transformer.models.Seq2SeqTransformer],
    [`TransformerClassifier`][keras_transformer.models.TransformerClassifier],
    [`TransformerLM`][keras_transformer.models.TransformerLM] and
    [`MaskedLM`][keras_transformer.models.MaskedLM] (their weights share names):
    attention projections are split by heads, the feed-forward kernels by
    columns then rows (Megatron style: one all-reduce per attention and per
    feed-forward block), and the token embeddings (hence the tied output
    projection) by vocabulary, or by width when a vocabulary does not divide
    over the axis; an untied output projection and the masked LM's output bias
    follow the vocabulary. Layer norms, biases after a row split, learned
    positions and the small heads (classifier, masked LM transform) are
    replicated. Every weight is replicated across the other mesh axes (data
    parallelism).

    With grouped-query attention, key and value kernels are split by heads
    when `num_key_value_heads` divides over the axis and replicated otherwise
    (fewer key/value heads than model shards), as Megatron-LM does; query
    heads must divide over the axis.

    Create the model (and compile it) under a `keras.distribution.ModelParallel`
    built from this map, so each variable is created sharded; see
    [`keras_transformer.distribution.make_distribution`][], which does this from
    a mesh shape.

    Args:
        device_mesh: a `keras.distribution.DeviceMesh` with an axis named
            `model_axis`.
        config: dict, the model's `get_config()` or the keyword arguments it is
            built with: `hidden_dim`, `num_heads` and `intermediate_dim` are
            required; `num_key_value_heads` and the vocabulary sizes
            (`vocabulary_size`, `source_vocabulary_size`,
            `target_vocabulary_size`) are read when present.
        model_axis: str, the mesh axis the weights are split over. Defaults to
            `"model"`.

    Returns:
        A `keras.distribution.LayoutMap`.

    Raises:
        ValueError: when `model_axis` is not an axis of `device_mesh`, or
            `num_heads` or `intermediate_dim` does not divide over it.

    Example:

    The map of a one-device mesh already says how each weight would be
    split; a look-up takes a variable's path:

    >>> import keras
    >>> from keras_transformer.distribution import get_layout_map
    >>> config = dict(source_vocabulary_size=100, hidden_dim=16, num_heads=2,
    ...               intermediate_dim=32)
    >>> mesh = keras.distribution.DeviceMesh((1, 1), ("batch", "model"), ["cpu:0"])
    >>> layout_map = get_layout_map(mesh, config)
    >>> layout_map["encoder/block_0/self_attention/query/kernel"].axes  # by heads
    (None, 'model', None)
    >>> layout_map["encoder/block_0/feed_forward/output_dense/kernel"].axes  # by rows
    ('model', None)
    >>> layout_map["source_embedding/token_embedding/embeddings"].axes  # by vocabulary
    ('model', None)
    >>> print(layout_map["encoder/block_0/self_attention_layer_norm/gamma"])  # replicated
    None

    Heads must divide over the model axis (device names are not checked
    here, so three can be named on one CPU):

    >>> mesh = keras.distribution.DeviceMesh((1, 3), ("batch", "model"),
    ...                                      ["cpu:0", "cpu:1", "cpu:2"])
    >>> get_layout_map(mesh, dict(config, num_heads=8))
    Traceback (most recent call last):
        ...
    ValueError: `num_heads`=8 cannot be split over the 3 devices of mesh axis 'model'. ...

    For training, on JAX with 8 devices (not run here):

    ```python
    config = dict(source_vocabulary_size=8000, hidden_dim=512, num_heads=8,
                  intermediate_dim=2048)
    mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"),
                                         keras.distribution.list_devices())
    distribution = keras.distribution.ModelParallel(
        layout_map=get_layout_map(mesh, config), batch_dim_name="batch")
    keras.distribution.set_distribution(distribution)
    model = keras_transformer.models.Seq2SeqTransformer(**config)
    ```

    References:
        - [Shoeybi et al., 2019](https://arxiv.org/abs/1909.08053), Megatron-LM
    """
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise ValueError(
            "`device_mesh` must be a `keras.distribution.DeviceMesh`. Received: "
            f"device_mesh={device_mesh!r} of type {type(device_mesh).__name__}."
        )
    axis_names = tuple(device_mesh.axis_names)
    if model_axis not in axis_names:
        raise ValueError(
            f"`model_axis`={model_axis!r} is not an axis of the mesh, whose axes are "
            f"{axis_names}. Pass one of them."
        )
    if not isinstance(config, dict):
        raise ValueError(
            "`config` must be a dict: the model's `get_config()` or its keyword arguments. "
            f"Received: config={config!r}."
        )
    hidden_dim = _required(config, "hidden_dim")
    num_heads = _required(config, "num_heads")
    intermediate_dim = _required(config, "intermediate_dim")
    key_value_heads = config.get("num_key_value_heads") or num_heads
    vocabularies = [config[key] for key in VOCABULARY_KEYS if config.get(key)]

    shards = device_mesh.shape[axis_names.index(model_axis)]
    total = int(device_mesh.devices.size)
    _check_divides("num_heads", num_heads, shards, model_axis, total)
    _check_divides("intermediate_dim", intermediate_dim, shards, model_axis, total)
    m = model_axis

    layout_map = keras.distribution.LayoutMap(device_mesh)
    layout_map[QUERY_KERNEL] = (None, m, None)
    layout_map[QUERY_BIAS] = (m, None)
    if key_value_heads % shards == 0:
        layout_map[KEY_VALUE_KERNEL] = (None, m, None)
        layout_map[KEY_VALUE_BIAS] = (m, None)
    # Otherwise every device keeps all key/value heads (left out of the map: replicated);
    # each query head still finds its group's key and value locally.
    layout_map[ATTENTION_OUTPUT_KERNEL] = (m, None, None)
    layout_map[INTERMEDIATE_KERNEL] = (None, m)
    layout_map[INTERMEDIATE_BIAS] = (m,)
    layout_map[FEED_FORWARD_OUTPUT_KERNEL] = (m, None)
    if vocabularies and all(size % shards == 0 for size in vocabularies):
        layout_map[TOKEN_EMBEDDINGS] = (m, None)
        layout_map[OUTPUT_PROJECTION_KERNEL] = (None, m)
        layout_map[OUTPUT_PROJECTION_BIAS] = (m,)
        layout_map[MASKED_LM_OUTPUT_BIAS] = (m,)
    elif hidden_dim % shards == 0:
        layout_map[TOKEN_EMBEDDINGS] = (None, m)
        layout_map[OUTPUT_PROJECTION_KERNEL] = (m, None)
    return layout_map
