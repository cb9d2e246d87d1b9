"""The paper's learning-rate schedule: linear warmup, then inverse square-root decay."""

import keras
from keras import ops

from keras_transformer.validation import is_int, is_real


@keras.saving.register_keras_serializable(package="keras_transformer")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    r"""Warmup then inverse square-root decay (Vaswani et al., 2017, eq. 3).

    With $d$ = `model_dim`, $w$ = `warmup_steps` and $s$ = `scale`, the rate at
    step $t$ is

    $$
    \mathit{lr}(t) = s \cdot d^{-0.5} \cdot \min\left(t^{-0.5},\; t \cdot w^{-1.5}\right),
    $$

    which grows linearly for the first $w$ steps, peaks at $t = w$ with
    $s \cdot (d \, w)^{-0.5}$, and then decays as $t^{-0.5}$.

    Step numbering: Keras optimizers call the schedule with their `iterations`
    counter, which counts the updates already applied and so is `0` for the
    first update. This schedule uses `step = iterations + 1`, the paper's
    1-based `step_num`: the first update gets the (finite, non-zero) rate of
    step 1, and calling the schedule with `warmup_steps - 1` gives the peak.

    The computation is branch-free `keras.ops`, so the schedule can be traced
    by `jit` on any backend.

    Args:
        model_dim: int, the model width `d_model`.
        warmup_steps: int, the number of linear-warmup steps. Defaults to `4000`.
        scale: float, a multiplier on the whole schedule (some implementations
            call it the "learning-rate factor"). Defaults to `1.0`.

    Example:

    >>> schedule = NoamSchedule(model_dim=512, warmup_steps=4000)
    >>> f"{float(schedule(3999)):.3e}"  # the peak, 512 ** -0.5 * 4000 ** -0.5
    '6.988e-04'
    >>> f"{float(schedule(0)):.3e}"  # the first update: step 1 of the warmup
    '1.747e-07'
    >>> f"{float(schedule(39999)):.3e}"  # ten times the warmup: the peak / sqrt(10)
    '2.210e-04'
    >>> optimizer = keras.optimizers.Adam(
    ...     learning_rate=schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9
    ... )

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.3.
    """

    def __init__(self, model_dim, warmup_steps=4000, scale=1.0):
        for name, value in (("model_dim", model_dim), ("warmup_steps", warmup_steps)):
            if not is_int(value) or value <= 0:
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: {name}={value!r}. "
                    + (
                        "Pass the model width `d_model`, e.g. 512."
                        if name == "model_dim"
                        else "Pass the number of warmup steps, e.g. 4000."
                    )
                )
        if not is_real(scale) or not scale > 0:
            raise ValueError(
                f"`scale` must be a positive number. Received: scale={scale!r}. "
                "Use `scale=1.0` for the paper's schedule."
            )
        self.model_dim = int(model_dim)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        # Both arms are evaluated and combined with `minimum` so that the
        # schedule stays a pure tensor expression under `jit`.
        warmup = step * (self.warmup_steps**-1.5)
        decay = ops.rsqrt(step)
        return (self.scale * self.model_dim**-0.5) * ops.minimum(warmup, decay)

    def get_config(self):
        return {
            "model_dim": self.model_dim,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }
