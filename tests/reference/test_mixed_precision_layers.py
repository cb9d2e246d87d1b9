"""Under mixed precision the layers compute what float32 computes, to 16-bit rounding.

The harness only checks that mixed-precision outputs are finite and in the compute dtype;
here a float32 layer with random weights and the same layer built under `mixed_bfloat16`
or `mixed_float16`, holding the same (float32) weights, must agree to within a stated
multiple of the 16-bit type's unit roundoff `u`:

- bfloat16 keeps 8 significant bits: `u = 2**-8 ≈ 3.9e-3` relative;
- float16 keeps 11: `u = 2**-11 ≈ 4.9e-4`.

Why these bounds. A block's output passes through about ten roundings in a chain (the
cast inputs and weights, each matmul and its accumulation, the softmax, the residual sum,
the layer norm's output), each off by at most `u` relative, mostly independent, so the
typical error is one to two `u` of the output's scale: measured (TensorFlow CPU, these
shapes and seeds) the mean error is 1.0-1.5 `u·rms` and the largest single element error
6-14 `u·rms` (post-norm rows of small variance amplify the error of their inputs). The
bounds, `MEAN_ULPS = 3` and `MAX_ULPS = 32` in units of `u·rms(float32 output)`, leave
about a factor of two over the worst measured value. An `atol` scaled by the output's rms
rather than an `rtol`: elements near zero have no relative precision to speak of in
either type. Scaling one weight (the first, a query kernel) of the 16-bit copy by 1.10
fails 13 of these 14 cases, by 1.03 every float16 case; a weight left out of the copy or
a mask value that overflows float16 (NaN) fails them too. They are too loose to see a
layer norm computed in 16 bits (one more rounding of about `u`): that has its own test
(`test_layer_norm_runs_in_float32_under_mixed_precision`, inputs scaled by 1000).

Where the platform's own 16-bit products round more than once (TensorFlow on CPUs with
AVX2 only), the bounds grow by `tests.platform_rounding.matmul_error_factor`: what is
asserted is that the layers add no error beyond the platform's products.
"""

import keras
import numpy as np
import pytest
from reference_utils import (
    NORMS,
    ZEROS,
    copy_weights,
    padding_mask,
    random_inputs,
    randomize_weights,
)

from keras_transformer.layers import (
    MultiHeadAttention,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)
from tests.platform_rounding import matmul_error_factor

pytestmark = pytest.mark.backend_agnostic

BATCH, TARGET, SOURCE, WIDTH, HEADS, FFN_DIM = 2, 6, 5, 16, 4, 32
UNIT_ROUNDOFF = {"mixed_bfloat16": 2.0**-8, "mixed_float16": 2.0**-11}
MEAN_ULPS, MAX_ULPS = 3.0, 32.0
POLICIES = pytest.mark.parametrize("policy", list(UNIT_ROUNDOFF), ids=["bf16", "f16"])


def assert_matches_float32(mixed, reference, policy):
    """`mixed` (16-bit) against `reference` (float32), in units of `u · rms(reference)`."""
    assert keras.backend.standardize_dtype(mixed.dtype) == policy.split("_")[1]
    mixed = keras.ops.convert_to_numpy(keras.ops.cast(mixed, "float32")).astype(np.float64)
    reference = np.asarray(keras.ops.convert_to_numpy(reference), np.float64)
    scale = UNIT_ROUNDOFF[policy] * np.sqrt(np.mean(reference**2))
    error = np.abs(mixed - reference)
    assert np.all(np.isfinite(mixed)), policy
    # And it really computed in 16 bits: float32 alone would differ by ~1e-7.
    assert error.max() > 0.1 * scale, (policy, error.max() / scale)
    scale *= matmul_error_factor(policy)
    assert error.mean() <= MEAN_ULPS * scale, (policy, error.mean() / scale)
    np.testing.assert_allclose(mixed, reference, rtol=0, atol=MAX_ULPS * scale, err_msg=policy)


def _pair(make, build, policy, seed):
    """A float32 layer with random weights, and the same layer under `policy` with a copy."""
    reference = make("float32")
    build(reference)
    randomize_weights(reference, seed)
    mixed = make(policy)
    build(mixed)
    assert mixed.compute_dtype == policy.split("_")[1]
    copy_weights(reference, mixed)
    assert all(w.dtype == "float32" for w in mixed.weights)
    return reference, mixed


@POLICIES
def test_self_attention_matches_float32(policy):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    reference, mixed = _pair(
        lambda dtype: MultiHeadAttention(HEADS, num_key_value_heads=2, dtype=dtype, **ZEROS),
        lambda layer: layer.build(x.shape, x.shape),
        policy,
        seed=0,
    )
    pad = padding_mask([TARGET, 4], TARGET)[:, None, :]
    kwargs = dict(attention_mask=pad, use_causal_mask=True)
    assert_matches_float32(mixed(x, x, **kwargs), reference(x, x, **kwargs), policy)


@POLICIES
def test_cross_attention_matches_float32(policy):
    query = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, 12)
    reference, mixed = _pair(
        lambda dtype: MultiHeadAttention(HEADS, dtype=dtype, **ZEROS),
        lambda layer: layer.build(query.shape, memory.shape),
        policy,
        seed=1,
    )
    mask = padding_mask([SOURCE, 2], SOURCE)[:, None, :]
    assert_matches_float32(
        mixed(query, memory, attention_mask=mask),
        reference(query, memory, attention_mask=mask),
        policy,
    )


def _block_kwargs(norm_first, dtype):
    return dict(
        num_heads=HEADS,
        intermediate_dim=FFN_DIM,
        norm_first=norm_first,
        activation="gelu",
        dtype=dtype,
        **ZEROS,
    )


@POLICIES
@NORMS
def test_encoder_block_matches_float32(policy, norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    pad = padding_mask([TARGET, 3], TARGET)
    reference, mixed = _pair(
        lambda dtype: TransformerEncoderBlock(**_block_kwargs(norm_first, dtype)),
        lambda layer: layer.build(x.shape),
        policy,
        seed=2,
    )
    assert_matches_float32(mixed(x, padding_mask=pad), reference(x, padding_mask=pad), policy)


@POLICIES
@NORMS
def test_decoder_block_matches_float32(policy, norm_first):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    encoder_pad = padding_mask([3, SOURCE], SOURCE)
    reference, mixed = _pair(
        lambda dtype: TransformerDecoderBlock(**_block_kwargs(norm_first, dtype)),
        lambda layer: layer.build(x.shape, memory.shape),
        policy,
        seed=3,
    )
    assert_matches_float32(
        mixed(x, memory, encoder_padding_mask=encoder_pad),
        reference(x, memory, encoder_padding_mask=encoder_pad),
        policy,
    )


@POLICIES
def test_two_layer_stacks_match_float32(policy):
    x = random_inputs(0, BATCH, TARGET, WIDTH)
    memory = random_inputs(1, BATCH, SOURCE, WIDTH)
    encoder, mixed_encoder = _pair(
        lambda dtype: TransformerEncoder(2, **_block_kwargs(True, dtype)),
        lambda layer: layer.build(x.shape),
        policy,
        seed=4,
    )
    assert_matches_float32(mixed_encoder(x), encoder(x), policy)
    decoder, mixed_decoder = _pair(
        lambda dtype: TransformerDecoder(2, **_block_kwargs(False, dtype)),
        lambda layer: layer.build(x.shape, memory.shape),
        policy,
        seed=5,
    )
    assert_matches_float32(mixed_decoder(x, memory), decoder(x, memory), policy)
