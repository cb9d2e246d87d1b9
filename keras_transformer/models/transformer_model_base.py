"""What the Transformer models share: padding masks, float32 logits, build-on-construct,
quantised layers in the config, LoRA and export signatures."""

import os
import tempfile

import keras
from keras import ops

from keras_transformer import sublayer_names as names
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.sublayer_quantization import (
    descendant_layers,
    quantize_sublayers,
    quantized_sublayers,
)
from keras_transformer.layers.token_and_position_embedding import TokenAndPositionEmbedding
from keras_transformer.validation import check_positive_int, is_int

# The projections LoRA adapts by default: every attention and feed-forward projection
# (the gate only exists in attention built with `use_gate=True`).
LORA_TARGETS = names.ATTENTION_PROJECTIONS + (names.GATE,) + names.FEED_FORWARD_PROJECTIONS


class TransformerModelBase(keras.Model):
    """Base of the models (not public).

    Subclasses create their layers in `__init__` and build them in `_build_layers`, so
    a model has its weights as soon as it exists (like a functional model): saving,
    loading and weight transfer never depend on a first call.

    Subclasses name their inputs in `INPUT_NAMES` (int32 token ids of any batch size
    and length), which `export` uses as its default `input_signature`, and their
    constructor arguments in `CONFIG_ARGUMENTS`, each kept in the attribute of its
    name, which `get_config` returns.
    """

    INPUT_NAMES = ("token_ids",)
    CONFIG_ARGUMENTS = ()

    def __init__(self, pad_id=0, **kwargs):
        super().__init__(**kwargs)
        if not is_int(pad_id) or pad_id < 0:
            raise ValueError(
                f"`pad_id` must be a non-negative integer token id. Received: pad_id={pad_id!r}."
            )
        self.pad_id = pad_id
        self.logits_bias = None

    def padding_mask(self, token_ids):
        """`True` at real tokens, `False` at `pad_id`.

        Args:
            token_ids: int tensor of any shape.

        Returns:
            A bool tensor of the same shape.

        Example:

        >>> from keras_transformer.models import TransformerLM
        >>> lm = TransformerLM(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                    intermediate_dim=32)
        >>> mask = lm.padding_mask(keras.ops.convert_to_tensor([[5, 6, 0]]))
        >>> keras.ops.convert_to_numpy(mask).tolist()
        [[True, True, False]]
        """
        return ops.not_equal(token_ids, ops.cast(self.pad_id, token_ids.dtype))

    @staticmethod
    def float32_logits(logits):
        # Softmax and the loss need float32 even when the model computes in 16 bits.
        return ops.cast(logits, "float32")

    def build(self, *args, **kwargs):
        if not self.built:
            self._build_layers()
            self.built = True

    def get_build_config(self):
        return {}

    def build_from_config(self, config):
        self.build()

    def _keep_arguments(self, arguments):
        """Keeps each constructor argument named in `CONFIG_ARGUMENTS` as an attribute.

        Args:
            arguments: the constructor's `locals()`, so that the names are listed
                once, in `CONFIG_ARGUMENTS`, for the attributes and `get_config`
                alike; names it lacks are left to the subclass.
        """
        for name in self.CONFIG_ARGUMENTS:
            if name in arguments:
                setattr(self, name, arguments[name])

    @staticmethod
    def _check_dims(**dims):
        for name, value in dims.items():
            check_positive_int(name, value)

    def _embedding(self, vocabulary_size, name, **kwargs):
        """Token embeddings plus positions, from the model's sizes and dropout."""
        return TokenAndPositionEmbedding(
            vocabulary_size,
            self.hidden_dim,
            sequence_length=self.max_sequence_length,
            position=self.position,
            mask_zero=False,  # padding masks come from `pad_id`, passed explicitly
            dropout=self.dropout,
            dtype=self.dtype_policy,
            name=name,
            **kwargs,
        )

    def _output_projection(self, vocabulary_size):
        """The output layer of `tie_output_embeddings=False`; `None` when tied."""
        if self.tie_output_embeddings:
            return None
        return keras.layers.Dense(
            vocabulary_size, dtype=self.dtype_policy, name="output_projection"
        )

    def _build_logits_bias(self, vocabulary_size):
        """The bias added to every logit (Marian's `final_logits_bias`), or `None`."""
        self.logits_bias = None
        if self.output_bias:
            self.logits_bias = self.add_weight(
                shape=(vocabulary_size,), initializer="zeros", name="logits_bias"
            )

    def _logits(self, embedding, hidden):
        """float32 logits: through `embedding`'s matrix when tied, else `output_projection`."""
        # float32: softmax and the loss need it when the model computes in 16 bits.
        if self.output_projection is None:
            logits = ops.cast(embedding.attend(hidden), "float32")
        else:
            logits = ops.cast(self.output_projection(hidden), "float32")
        if self.logits_bias is not None:
            logits = logits + ops.cast(self.logits_bias, "float32")
        return logits

    def _stack_arguments(self):
        """What every encoder or decoder stack takes from the model's own arguments."""
        return dict(
            num_heads=self.num_heads,
            intermediate_dim=self.intermediate_dim,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation_dropout=self.activation_dropout,
            activation=self.activation,
            norm_first=self.norm_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            # The embeddings add absolute positions; attention encodes relative ones.
            relative_position=self.position if self.position in ("rotary", "alibi") else None,
            dtype=self.dtype_policy,
        )

    def _sublayers(self):
        return descendant_layers(self)

    def get_config(self):
        config = super().get_config()
        # Our layers do not serialise their sub-layers, so a layer quantised by
        # `model.quantize` is recorded here and quantised again on load, before its
        # (integer) weights are read.
        quantized = quantized_sublayers(self)
        if quantized:
            config["quantized_layers"] = quantized
        config.update({name: getattr(self, name) for name in self.CONFIG_ARGUMENTS})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        quantized = config.pop("quantized_layers", None)
        model = cls(**config)
        if quantized:
            quantize_sublayers(model, quantized)
        return model

    def lora_targets(self, target_names=None):
        """The `Dense` / `EinsumDense` projections `enable_lora` adapts.

        Args:
            target_names: names of the projections, among `"query"`, `"key"`,
                `"value"`, `"attention_output"` (attention) and
                `"intermediate_dense"`, `"output_dense"` (feed-forward).
                Defaults to `None`: all six.

        Returns:
            A list of layers.

        Raises:
            ValueError: for an empty `target_names` or an unknown name.

        Example:

        >>> from keras_transformer.models import TransformerClassifier
        >>> model = TransformerClassifier(100, num_classes=2, num_layers=2,
        ...                               hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> len(model.lora_targets())  # 2 blocks x (4 attention + 2 feed-forward)
        12
        >>> sorted({layer.name for layer in model.lora_targets(["query", "value"])})
        ['query', 'value']
        """
        names = LORA_TARGETS if target_names is None else tuple(target_names)
        unknown = sorted(set(names) - set(LORA_TARGETS))
        if unknown or not names:
            raise ValueError(
                f"`target_names` must be a non-empty subset of {list(LORA_TARGETS)}. "
                f"Received: target_names={target_names!r}."
            )
        targets = []
        for parent in self._sublayers():
            if isinstance(parent, (MultiHeadAttention, FeedForward)):
                targets += [
                    layer
                    for layer in descendant_layers(parent)
                    if layer.name in names and hasattr(layer, "enable_lora")
                ]
        return targets

    def enable_lora(self, rank, lora_alpha=None, target_names=None):
        """Freezes the model and adds LoRA adapters to its projections.

        Every existing weight becomes non-trainable; each target projection gets
        two low-rank matrices `A` (random) and `B` (zeros), so the model starts
        computing exactly what it computed before and `fit` trains only `A` and
        `B`. Works on a quantised model too (int8: QLoRA). Saving writes each
        kernel with its LoRA delta merged in (Keras's `EinsumDense` / `Dense`
        behaviour); `merge_lora` gives the merged model for serving.

        Args:
            rank: int, the rank of the adapters.
            lora_alpha: float, the adapters' scale is `lora_alpha / rank`.
                Defaults to `None`, meaning `rank`.
            target_names: see `lora_targets`. Defaults to `None`: every
                attention and feed-forward projection.

        Raises:
            ValueError: for a `rank` that is not a positive int, unknown
                `target_names`, or a model whose LoRA is already enabled.

        Example:

        >>> from keras_transformer.models import TransformerLM
        >>> lm = TransformerLM(100, num_layers=1, hidden_dim=16, num_heads=2,
        ...                    intermediate_dim=32)
        >>> ids = keras.ops.convert_to_tensor([[5, 6, 7]])
        >>> before = lm(ids)
        >>> lm.enable_lora(rank=2, target_names=["query", "value"])
        >>> len(lm.trainable_weights)  # A and B of 2 projections
        4
        >>> float(keras.ops.max(keras.ops.abs(lm(ids) - before)))  # B starts at zero
        0.0

        References:
            - [Hu et al., 2021](https://arxiv.org/abs/2106.09685)
        """
        check_positive_int("rank", rank)
        targets = self.lora_targets(target_names)
        enabled = [layer.name for layer in targets if layer.lora_enabled]
        if enabled:
            raise ValueError(
                f"LoRA is already enabled on {len(enabled)} projections of this model; "
                "enable it once, or merge it first with `model.merge_lora()`."
            )
        # Adapters made while a layer is frozen would be frozen too: enable, then freeze
        # every other variable (a flag per variable; the layers stay trainable).
        self.trainable = True
        for layer in targets:
            layer.enable_lora(rank, lora_alpha=lora_alpha)
        adapters = {id(v) for layer in targets for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
        for variable in self.weights:
            if id(variable) not in adapters:
                variable.trainable = False

    def merge_lora(self):
        """A copy of this model with every LoRA delta merged into its kernel.

        The copy has the original architecture and no LoRA weights: what to serve
        or export after LoRA fine-tuning.

        Returns:
            A new model of the same class.

        Example:

        >>> from keras_transformer.models import TransformerClassifier
        >>> model = TransformerClassifier(100, num_classes=2, num_layers=1,
        ...                               hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> model.enable_lora(rank=2)
        >>> # ... model.fit(...) trains the adapters; here B is set by hand instead.
        >>> query = model.lora_targets(["query"])[0]
        >>> _ = query.lora_kernel_b.assign(keras.ops.ones(query.lora_kernel_b.shape))
        >>> merged = model.merge_lora()
        >>> any("lora" in v.path for v in merged.weights)
        False
        >>> ids = keras.ops.convert_to_tensor([[5, 6, 7]])
        >>> bool(keras.ops.max(keras.ops.abs(merged(ids) - model(ids))) < 1e-5)
        True
        """
        merged = type(self).from_config(self.get_config())
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "merged.weights.h5")
            # Keras writes a LoRA-enabled kernel with its delta merged in.
            self.save_weights(path)
            merged.load_weights(path)
        return merged

    def export_input_signature(self):
        """The default `input_signature` of `export`: int32 ids, any batch and length.

        Returns:
            A dict of `keras.InputSpec`, one per name of the model's inputs.

        Example:

        >>> from keras_transformer.models import Seq2SeqTransformer
        >>> model = Seq2SeqTransformer(100, num_encoder_layers=1, num_decoder_layers=1,
        ...                            hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> {name: spec.shape for name, spec in model.export_input_signature().items()}
        {'encoder_token_ids': (None, None), 'decoder_token_ids': (None, None)}
        """
        return {
            name: keras.InputSpec(shape=(None, None), dtype="int32", name=name)
            for name in self.INPUT_NAMES
        }

    def export(
        self, filepath, format="tf_saved_model", verbose=None, input_signature=None, **kwargs
    ):
        """`keras.Model.export` with our inputs as the default signature.

        Keras infers a subclassed model's signature from its first call; ours are
        built on construction, so `export` works before any call, with the inputs
        of `export_input_signature` (a dict of int32 `(batch, length)` ids).

        Args:
            filepath: where to write the artifact.
            format: `"tf_saved_model"` or `"onnx"` (and Keras's other formats).
                Defaults to `"tf_saved_model"`.
            verbose: bool, print a message. Defaults to `None` (Keras's default).
            input_signature: Defaults to `None`, meaning
                `[model.export_input_signature()]`.
            **kwargs: passed to `keras.Model.export`.

        Returns:
            What `keras.Model.export` returns (`None` for a SavedModel).

        Example:

        The export itself is skipped here: it takes seconds even for a tiny
        model, as TensorFlow traces and writes the graph.

        >>> import tempfile
        >>> from keras_transformer.models import TransformerClassifier
        >>> model = TransformerClassifier(100, num_classes=2, num_layers=1,
        ...                               hidden_dim=16, num_heads=2, intermediate_dim=32)
        >>> directory = tempfile.mkdtemp()
        >>> model.export(directory + "/classifier", verbose=False)  # doctest: +SKIP
        >>> import tensorflow as tf  # doctest: +SKIP
        >>> reloaded = tf.saved_model.load(directory + "/classifier")  # doctest: +SKIP
        >>> reloaded.serve({"token_ids": tf.ones((2, 5), tf.int32)}).shape  # doctest: +SKIP
        TensorShape([2, 2])
        """
        if input_signature is None:
            input_signature = [self.export_input_signature()]
        return super().export(
            filepath, format=format, verbose=verbose, input_signature=input_signature, **kwargs
        )
