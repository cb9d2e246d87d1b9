"""Each model's mixed-precision logits equal its float32 logits, same weights, to 16-bit rounding.

`test_model_common` checks that mixed-precision logits are float32 and finite; this checks
their values. Tolerances as in `tests/reference/test_mixed_precision_layers.py`, in units of
the 16-bit unit roundoff `u` (bfloat16: 8 significant bits, `2**-8 ≈ 3.9e-3`; float16: 11,
`2**-11 ≈ 4.9e-4`) times the rms of the float32 logits. A model is an embedding, a block or
two and a projection, a chain of about twenty roundings: measured on TensorFlow CPU the
mean error is 1.4-2.3 `u·rms` and the largest 6-15 `u·rms`; the bounds (4 and 32) leave a
factor of about two. Where the platform's own 16-bit products round more than once, the
bounds grow by `tests.platform_rounding.matmul_error_factor`.
"""

import keras
import numpy as np
import pytest
from model_cases import CASES, predict_logits

from tests.platform_rounding import matmul_error_factor

pytestmark = pytest.mark.backend_agnostic

UNIT_ROUNDOFF = {"mixed_bfloat16": 2.0**-8, "mixed_float16": 2.0**-11}
MEAN_ULPS, MAX_ULPS = 4.0, 32.0


def _random_weights(model, seed):
    """Non-trivial values everywhere (biases and betas non-zero, gammas away from one)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "float" in variable.dtype:
            value = rng.normal(0.0, 0.3, tuple(variable.shape))
            if variable.path.endswith("gamma"):
                value += 1.0
            variable.assign(value.astype("float32"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("policy", list(UNIT_ROUNDOFF), ids=["bf16", "f16"])
def test_mixed_precision_logits_match_float32(case, policy, rng):
    reference = case.make(dropout=0.0)
    _random_weights(reference, seed=1)
    mixed = case.make(dropout=0.0, dtype=policy)
    assert mixed.compute_dtype == policy.split("_")[1]
    mixed.set_weights(reference.get_weights())
    x, _ = case.data(rng)

    expected = predict_logits(reference, x).astype(np.float64)
    logits = predict_logits(mixed, x)
    assert logits.dtype == np.float32  # the models' logits are float32 under every policy
    scale = UNIT_ROUNDOFF[policy] * np.sqrt(np.mean(expected**2))
    error = np.abs(logits - expected)
    # The 16-bit model really rounds: were it computing in float32 the error would be ~1e-7.
    assert error.max() > 0.1 * scale
    scale *= matmul_error_factor(policy)
    assert error.mean() <= MEAN_ULPS * scale, (policy, error.mean() / scale)
    np.testing.assert_allclose(logits, expected, rtol=0, atol=MAX_ULPS * scale)
    assert keras.config.dtype_policy().name == "float32"
