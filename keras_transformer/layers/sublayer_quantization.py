"""Recording which sub-layers `model.quantize` quantised, so that a save loads again.

Our layers build their sub-layers themselves and do not serialise them, so the dtype
policy that `quantize` gives a sub-layer (and the integer weights it then holds) would
be lost on save: the loaded layer would be float and refuse the saved variables.
"""

import keras


def _relative_path(owner, layer):
    # Relative, as the owner's own name may differ between the saved and loaded copy.
    path, prefix = layer.path or layer.name, (owner.path or owner.name) + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def descendant_layers(owner):
    """Every layer inside `owner`, depth first, attributes in alphabetical order.

    Found through public attributes only: a layer, or a list, tuple or dict of
    them (Keras tracks those), and a model's `layers`. Our layers keep their
    sub-layers in public attributes, so this reaches what `keras.Model.quantize`
    reaches.
    """
    found, seen = [], {id(owner)}

    def visit(value):
        if isinstance(value, keras.layers.Layer):
            if id(value) in seen:
                return
            seen.add(id(value))
            found.append(value)
            visit_attributes(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    def visit_attributes(layer):
        if isinstance(layer, keras.Model):
            visit(layer.layers)
        # `dir`, not `vars`: on PyTorch a layer is a `torch.nn.Module`, which keeps its
        # sub-layers out of the instance dict. Class attributes (methods, properties) are
        # skipped: sub-layers are instance attributes.
        for name in dir(layer):
            if not name.startswith("_") and not hasattr(type(layer), name):
                visit(getattr(layer, name, None))

    visit_attributes(owner)
    return found


def quantized_sublayers(owner):
    """`{relative path: {"mode", "config"}}` of every quantised layer inside `owner`."""
    return {
        _relative_path(owner, layer): {
            "mode": layer.quantization_mode,
            "config": keras.saving.serialize_keras_object(
                getattr(layer, "quantization_config", None)
            ),
        }
        for layer in descendant_layers(owner)
        if layer.quantization_mode is not None
    }


def quantize_sublayers(owner, quantized):
    """Quantises the layers inside `owner` that `quantized_sublayers` recorded."""
    layers = {_relative_path(owner, layer): layer for layer in descendant_layers(owner)}
    unknown = sorted(set(quantized) - set(layers))
    if unknown:
        raise ValueError(
            f"The saved quantisation names layers that this {type(owner).__name__} does not "
            f"have: {unknown[:3]}. The saved config belongs to another architecture."
        )
    for path, entry in quantized.items():
        if layers[path].quantization_mode is not None:
            continue
        config = entry.get("config")
        if config is not None:
            config = keras.saving.deserialize_keras_object(config)
        layers[path].quantize(entry["mode"], config=config)


class SublayerQuantization:
    """Mixin for a layer with sub-layers: the build config records quantised ones.

    `build_from_config` (what Keras runs on load, before reading the variables) builds
    the layer and quantises the recorded sub-layers again.
    """

    def get_build_config(self):
        config = super().get_build_config()
        quantized = quantized_sublayers(self) if self.built else {}
        if quantized:
            config = {**(config or {}), "quantized_layers": quantized}
        return config

    def build_from_config(self, config):
        config = dict(config or {})
        quantized = config.pop("quantized_layers", None)
        super().build_from_config(config)
        if quantized:
            quantize_sublayers(self, quantized)
