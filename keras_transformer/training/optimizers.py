"""The paper's optimizer: Adam on the warmup / inverse square-root schedule."""

import keras

from keras_transformer.training.schedules import NoamSchedule


def paper_optimizer(model_dim, warmup_steps=4000, scale=1.0, **kwargs):
    """Adam with `beta_1=0.9`, `beta_2=0.98`, `epsilon=1e-9` on a `NoamSchedule`.

    The optimizer and learning-rate schedule of the paper's base and big
    models. Keyword arguments beyond the schedule's are passed to
    `keras.optimizers.Adam` (e.g. `global_clipnorm`); the paper uses none.

    Args:
        model_dim: int, the model width `d_model`.
        warmup_steps: int, the number of linear-warmup steps. Defaults to `4000`.
        scale: float, a multiplier on the learning-rate schedule. Defaults to `1.0`.
        **kwargs: further arguments of `keras.optimizers.Adam`; `learning_rate`,
            `beta_1`, `beta_2` and `epsilon` are fixed by the recipe and
            rejected.

    Returns:
        A `keras.optimizers.Adam` whose `learning_rate` is
        [`NoamSchedule(model_dim, warmup_steps, scale)`][keras_transformer.training.NoamSchedule].

    Example:

    >>> optimizer = paper_optimizer(model_dim=512)
    >>> type(optimizer).__name__, optimizer.beta_1, optimizer.beta_2, optimizer.epsilon
    ('Adam', 0.9, 0.98, 1e-09)
    >>> f"{float(optimizer.learning_rate):.3e}"  # NoamSchedule(512) before the first update
    '1.747e-07'

    Compile a model with it and the paper's loss:
    `model.compile(optimizer=paper_optimizer(512), loss=LabelSmoothedCrossEntropy())`.

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.3.
    """
    fixed = sorted({"learning_rate", "beta_1", "beta_2", "epsilon"} & kwargs.keys())
    if fixed:
        raise ValueError(
            f"`paper_optimizer` fixes {', '.join(f'`{k}`' for k in fixed)}; "
            f"received {', '.join(f'{k}={kwargs[k]!r}' for k in fixed)}. Build "
            "`keras.optimizers.Adam(learning_rate=NoamSchedule(...), ...)` directly "
            "to change them."
        )
    return keras.optimizers.Adam(
        learning_rate=NoamSchedule(model_dim, warmup_steps=warmup_steps, scale=scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        **kwargs,
    )
