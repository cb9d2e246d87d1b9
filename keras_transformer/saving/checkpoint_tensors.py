"""How a checkpoint's named tensors map onto our layers' variables, both ways.

Each architecture (`huggingface_marian.py`, `huggingface_bert.py`,
`huggingface_gpt2.py`) lists one `Tensor` per tensor of the checkpoint: its
name (and the other names a tied tensor goes by), its shape there, our
variables it fills, and how the values are laid out on each side. Loading and
saving both read the same list, so the two directions cannot drift apart.
"""

import dataclasses

import numpy as np

from keras_transformer import sublayer_names as names
from keras_transformer.saving.pretrained import PretrainedDirectoryError


@dataclasses.dataclass
class Tensor:
    """One checkpoint tensor and the variables of ours it fills.

    Args:
        name: the tensor's name in the checkpoint, as transformers writes it.
        shape: its shape there.
        variables: our `keras.Variable`s it fills.
        to_ours: array -> list of arrays, one per variable.
        to_theirs: list of arrays (the variables' values) -> array.
        aliases: other names of the same (tied) tensor that a file may hold instead.
        optional: whether a file may lack it (transformers recreates it), the
            variables then keeping their initial values.
    """

    name: str
    shape: tuple
    variables: list
    to_ours: object
    to_theirs: object
    aliases: tuple = ()
    optional: bool = False


def same(name, variable):
    """A tensor stored as we store it (embeddings, biases, layer norms)."""
    return Tensor(name, tuple(variable.shape), [variable], lambda a: [a], lambda values: values[0])


def linear(name, dense):
    """A `torch.nn.Linear` weight `(out, in)` ↔ a `Dense` / `EinsumDense` kernel.

    The kernel may split the output into heads (`(in, heads, head_dim)`, a
    query, key or value projection) or take heads as input (`(heads, head_dim,
    out)`, the attention output): the values are the transposed matrix either way.
    """
    kernel = dense.kernel
    shape = tuple(kernel.shape)
    if len(shape) == 3 and _heads_first(dense):
        rows, columns = shape[0] * shape[1], shape[2]
    else:
        rows, columns = shape[0], int(np.prod(shape[1:]))
    return Tensor(
        name,
        (columns, rows),
        [kernel],
        lambda a: [a.T.reshape(shape)],
        lambda values: values[0].reshape(rows, columns).T,
    )


def _heads_first(dense):
    # The attention output's equation reads (heads, head_dim) in, the projections' write it out.
    return dense.name == names.ATTENTION_OUTPUT


def bias(name, dense):
    """A bias, flattened on the checkpoint's side (`(heads * head_dim,)`)."""
    variable = dense.bias
    shape = tuple(variable.shape)
    return Tensor(
        name,
        (int(np.prod(shape)),),
        [variable],
        lambda a: [a.reshape(shape)],
        lambda values: values[0].reshape(-1),
    )


def assign(tensors, entries, source, ignored=()):
    """Fills every entry's variables from `tensors`, after checking names and shapes.

    Raises `PretrainedDirectoryError` naming each missing tensor with the
    expected shape, each tensor of the file not accounted for, and each shape
    that differs.
    """
    chosen = {}
    missing = []
    for entry in entries:
        found = [name for name in (entry.name, *entry.aliases) if name in tensors]
        if found:
            chosen[entry.name] = found[0]
        elif not entry.optional:
            missing.append(f"'{entry.name}' {entry.shape}")
    known = {name for entry in entries for name in (entry.name, *entry.aliases)}
    extra = sorted(
        name
        for name in tensors
        if name not in known and not any(name.endswith(suffix) for suffix in ignored)
    )
    wrong = [
        f"'{chosen[entry.name]}' is {tensors[chosen[entry.name]].shape}, expected {entry.shape}"
        for entry in entries
        if entry.name in chosen and tuple(tensors[chosen[entry.name]].shape) != entry.shape
    ]
    problems = []
    if missing:
        problems.append("missing " + ", ".join(missing))
    if extra:
        problems.append("not expected " + ", ".join(f"'{name}'" for name in extra))
    if wrong:
        problems.append("; ".join(wrong))
    if problems:
        raise PretrainedDirectoryError(
            f"The weights of {source} do not fit the model its config.json describes: "
            + "; ".join(problems)
            + "."
        )
    for entry in entries:
        if entry.name not in chosen:
            continue
        for variable, value in zip(entry.variables, entry.to_ours(tensors[chosen[entry.name]])):
            variable.assign(value.astype(variable.dtype))


def collect(entries):
    """`{name: array}` of every entry, from our variables' values."""
    import keras

    tensors = {}
    for entry in entries:
        values = [np.asarray(keras.ops.convert_to_numpy(v), "float32") for v in entry.variables]
        tensors[entry.name] = entry.to_theirs(values)
    return tensors


def attention(prefix, layer, projections):
    """Weight and bias of the query, key, value and output projections of `layer`.

    Args:
        prefix: the attention module's name in the checkpoint.
        layer: our `MultiHeadAttention`.
        projections: the checkpoint's names of the four projections, in the order
            query, key, value, output.
    """
    entries = []
    denses = (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense)
    for dense, name in zip(denses, projections):
        entries += [linear(f"{prefix}.{name}.weight", dense), bias(f"{prefix}.{name}.bias", dense)]
    return entries


def layer_norm(prefix, layer):
    """A layer normalization's scale and offset (`weight`, `bias` in the checkpoint)."""
    return [same(f"{prefix}.weight", layer.gamma), same(f"{prefix}.bias", layer.beta)]


def dense(prefix, layer):
    """A `torch.nn.Linear` and its bias ↔ a `Dense`."""
    return [linear(f"{prefix}.weight", layer), bias(f"{prefix}.bias", layer)]


@dataclasses.dataclass
class Size:
    """A size `config.json` states and the checkpoint's tensors that hold it.

    Args:
        key: the config's key (`"vocab_size"`).
        value: the size the model would be built with.
        tensors: names of tensors that hold it (a tied tensor's names, or the
            same tensor in every layer): one of them found with the size is
            enough, a single odd tensor being `assign`'s to name.
        axis: the axis of those tensors that has the size.
        stated: how the message words the config's value. Defaults to `value`.
        optional: a file may lack every one of `tensors` (then nothing is checked).
    """

    key: str
    value: int
    tensors: tuple
    axis: int
    stated: str = None
    optional: bool = False


@dataclasses.dataclass
class LayerCount:
    """A number of layers `config.json` states, and the tensors' prefix (`"encoder.layer."`)."""

    key: str
    value: int
    prefix: str


def check_sizes(checks, shapes, source, weights):
    """Refuses a `config.json` whose sizes are not those of its tensors, before any building.

    Only the shapes are read (a safetensors header), so a config claiming a
    huge size is refused without allocating it.

    Args:
        checks: `Size` and `LayerCount` entries.
        shapes: `{name: shape}` of the checkpoint's tensors.
        source: the folder, as messages name it.
        weights: the weight file, as messages name it (`"model.safetensors"`).

    Raises:
        PretrainedDirectoryError: naming, for each size that disagrees, the
            config's key and value and the tensor with its shape.
    """
    problems = []
    for check in checks:
        if isinstance(check, LayerCount):
            problem = _layer_count_problem(check, shapes, weights)
        else:
            problem = _size_problem(check, shapes, weights)
        if problem:
            problems.append(problem)
    if problems:
        raise PretrainedDirectoryError(
            f"{source}: "
            + "; ".join(problems)
            + ". The config.json and the weights must be the same checkpoint's."
        )


def _size_problem(check, shapes, weights):
    found = [name for name in check.tensors if len(shapes.get(name, ())) > check.axis]
    stated = check.value if check.stated is None else check.stated
    if not found:
        # No layer's tensor at all: the layer count names that.
        if check.optional or not check.tensors:
            return None
        return f"{weights} has no '{check.tensors[0]}', which holds config.json's `{check.key}`"
    if any(shapes[name][check.axis] == check.value for name in found):
        return None
    name = found[0]
    return f"config.json says `{check.key}` {stated} but '{name}' is {shapes[name]}"


def _layer_count_problem(check, shapes, weights):
    indices = set()
    for name in shapes:
        if name.startswith(check.prefix):
            segment = name[len(check.prefix) :].split(".")[0]
            if segment.isdigit():
                indices.add(int(segment))
    indices = sorted(indices)
    # Not `set(range(check.value))`: the config's number may be huge.
    if indices == list(range(len(indices))) and len(indices) == check.value:
        return None
    if not indices:
        held = f"no tensors for layers ({check.prefix}0, ...)"
    elif indices == list(range(len(indices))) and len(indices) > 1:
        held = f"tensors for {len(indices)} layers ({check.prefix}0–{indices[-1]})"
    else:
        counted = "1 layer" if len(indices) == 1 else f"{len(indices)} layers"
        held = f"tensors for {counted} ({check.prefix}{', '.join(map(str, indices))})"
    return f"config.json says `{check.key}` {check.value} but {weights} has {held}"


def per_layer(shapes, prefix, suffix):
    """The names `prefix<i>suffix` among `shapes`, in layer order (only those the file holds)."""
    names = []
    for name in shapes:
        if name.startswith(prefix) and name.endswith(suffix):
            index = name[len(prefix) : len(name) - len(suffix)]
            if index.isdigit():
                names.append((int(index), name))
    return tuple(name for _, name in sorted(names))
