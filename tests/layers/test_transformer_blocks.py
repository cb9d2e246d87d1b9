import keras
import numpy as np
import pytest

from keras_transformer.layers import (
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)
from tests.harness import run_layer_test

B, T, S, D = 2, 5, 6, 16
BLOCK = {"num_heads": 4, "intermediate_dim": 32, "dropout": 0.1, "attention_dropout": 0.1}


# Each class's first configuration runs the whole harness (the pre-norm encoder block on
# every backend, marked `backend_agnostic`); the others are `variant`s (see the harness).
# Mixed precision is left to tests/reference/test_mixed_precision_layers.py, which holds
# these classes to float32's values, not only to finite outputs in the compute dtype.
@pytest.mark.parametrize(
    "norm_first", [False, pytest.param(True, marks=pytest.mark.backend_agnostic)]
)
def test_encoder_block_contract(rng, norm_first):
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    run_layer_test(
        TransformerEncoderBlock,
        {**BLOCK, "norm_first": norm_first, "activation_dropout": 0.1},
        {"inputs": x, "padding_mask": mask},
        (B, T, D),
        expected_num_trainable_weights=16,
        run_mixed_precision=False,
        variant=not norm_first,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_contract(rng, norm_first):
    run_layer_test(
        TransformerDecoderBlock,
        {**BLOCK, "norm_first": norm_first, "num_key_value_heads": 2},
        {
            "inputs": rng.standard_normal((B, T, D)).astype("float32"),
            "encoder_outputs": rng.standard_normal((B, S, D)).astype("float32"),
        },
        (B, T, D),
        expected_num_trainable_weights=26,
        run_mixed_precision=False,
        variant=norm_first,
    )


def test_decoder_only_block_contract(rng):
    run_layer_test(
        TransformerDecoderBlock,
        {**BLOCK, "cross_attention": False},
        rng.standard_normal((B, T, D)).astype("float32"),
        (B, T, D),
        expected_num_trainable_weights=16,
        variant=True,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_contract(rng, norm_first):
    layer = run_layer_test(
        TransformerEncoder,
        # The full check (pre-norm) saves Keras's regularizer arguments and a window too.
        {"num_layers": 2, **BLOCK, "norm_first": norm_first}
        | (
            {"kernel_regularizer": "l2", "activity_regularizer": "l1", "sliding_window": 3}
            if norm_first
            else {}
        ),  # fmt: skip
        rng.standard_normal((B, T, D)).astype("float32"),
        (B, T, D),
        expected_num_trainable_weights=32 + (2 if norm_first else 0),
        run_mixed_precision=False,
        variant=not norm_first,
    )
    assert (layer.final_layer_norm is not None) == norm_first


def test_decoder_stack_contract(rng):
    run_layer_test(
        TransformerDecoder,
        {"num_layers": 2, **BLOCK, "norm_first": True},
        {
            "inputs": rng.standard_normal((B, T, D)).astype("float32"),
            "encoder_outputs": rng.standard_normal((B, S, D)).astype("float32"),
        },
        (B, T, D),
        expected_num_trainable_weights=54,
        run_mixed_precision=False,
    )


def test_post_norm_output_is_normalized(rng):
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=8, dropout=0.0)
    out = np.asarray(block(rng.standard_normal((B, T, D)).astype("float32")))
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(out.std(-1), 1, atol=1e-2)


def test_layer_norm_runs_in_float32_under_mixed_precision(rng):
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=8, dtype="mixed_bfloat16")
    out = block(rng.standard_normal((B, T, D)).astype("float32") * 1000)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    np.testing.assert_allclose(np.asarray(keras.ops.cast(out, "float32")).std(-1), 1, atol=2e-2)


def test_return_attention_scores(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    memory = rng.standard_normal((B, S, D)).astype("float32")
    _, scores = TransformerEncoderBlock(**BLOCK)(x, return_attention_scores=True)
    assert scores.shape == (B, 4, T, T)
    _, scores = TransformerDecoderBlock(**BLOCK)(x, memory, return_attention_scores=True)
    assert scores["self_attention"].shape == (B, 4, T, T)
    assert scores["cross_attention"].shape == (B, 4, T, S)
    assert np.all(np.triu(np.asarray(scores["self_attention"]), k=1) == 0)
    _, scores = TransformerEncoder(2, **BLOCK)(x, return_attention_scores=True)
    assert len(scores) == 2


def test_stack_forwards_block_arguments():
    encoder = TransformerEncoder(3, 4, 32, dropout=0.3, activation="gelu", name="enc")
    encoder.build((None, None, D))
    assert len(encoder.blocks) == 3
    assert all(block.dropout == 0.3 for block in encoder.blocks)
    config = encoder.get_config()
    assert config["num_layers"] == 3 and config["dropout"] == 0.3 and config["name"] == "enc"


@pytest.mark.parametrize("cls", [TransformerEncoderBlock, TransformerDecoderBlock])
def test_block_errors(cls):
    with pytest.raises(ValueError, match=r"\(16\) is not divisible by `num_heads` \(3\)"):
        cls(num_heads=3, intermediate_dim=8).build((None, 4, 16))
    with pytest.raises(ValueError, match="`layer_norm_epsilon` must be a positive float"):
        cls(num_heads=2, intermediate_dim=8, layer_norm_epsilon=0)
    with pytest.raises(ValueError, match=r"`attention_dropout` must be a float in \[0, 1\)"):
        cls(num_heads=2, intermediate_dim=8, attention_dropout=1)
    with pytest.raises(ValueError, match=r"`inputs` must have rank 3.*\(4, 16\)"):
        cls(num_heads=2, intermediate_dim=8).build((4, 16))


def test_mask_shape_errors(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    block = TransformerEncoderBlock(**BLOCK)
    # The attention layer checks the block's padding mask, which it receives as `key_mask`.
    with pytest.raises(ValueError, match="a block's padding mask.* key axis has length 4"):
        block(x, padding_mask=np.ones((B, 4), bool))
    with pytest.raises(ValueError, match="`attention_mask` .* query axis has length 3"):
        block(x, attention_mask=np.ones((B, 3, T), bool))
    decoder = TransformerDecoderBlock(**BLOCK)
    memory = rng.standard_normal((B, S, D)).astype("float32")
    with pytest.raises(ValueError, match="a block's padding mask.* key axis has length 5"):
        decoder(x, memory, encoder_padding_mask=np.ones((B, 5), bool))


def test_decoder_cross_attention_errors(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    with pytest.raises(ValueError, match="needs `encoder_outputs`"):
        TransformerDecoderBlock(**BLOCK)(x)
    with pytest.raises(ValueError, match="`cross_attention=False`"):
        TransformerDecoderBlock(**BLOCK, cross_attention=False)(x, x)


def test_stack_errors():
    with pytest.raises(ValueError, match="`num_layers` must be a positive integer"):
        TransformerEncoder(0, 2, 8)
    with pytest.raises(ValueError, match="`num_key_value_heads`"):
        TransformerDecoder(2, 4, 8, num_key_value_heads=3)


def test_decoder_refuses_a_stacked_cache_and_names_the_per_block_form(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    decoder = TransformerDecoder(2, **BLOCK, cross_attention=False)
    decoder(x)
    caches = decoder.initial_self_attention_cache(B, 8)
    assert len(caches) == 2 and tuple(caches[0].shape)[1:3] == (2, 8)
    stacked = keras.ops.stack(caches, axis=1)
    with pytest.raises(ValueError, match=r"tuple\(keras.ops.unstack\(cache, axis=1\)\)"):
        decoder(x[:, :1], self_attention_cache=stacked, cache_update_index=0)
    with pytest.raises(ValueError, match="one cache per block"):
        decoder(x[:, :1], self_attention_cache=caches[:1], cache_update_index=0)
