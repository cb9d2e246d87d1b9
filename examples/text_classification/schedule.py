"""The optimizer of the example: AdamW, linear warmup then cosine decay."""

import keras

WARMUP_FRACTION = 0.06  # RoBERTa's fine-tuning recipe warms up over 6% of the steps.


def fine_tuning_optimizer(
    learning_rate, total_steps, weight_decay=0.01, warmup_fraction=WARMUP_FRACTION
):
    """AdamW whose rate rises linearly to `learning_rate`, then decays to 0 by `total_steps`.

    The rise takes `warmup_fraction` of the steps. Layer-norm scales and biases are not
    decayed (as in BERT).
    """
    warmup_steps = max(1, round(warmup_fraction * total_steps))
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=max(1, total_steps - warmup_steps),
        warmup_target=learning_rate,
        warmup_steps=warmup_steps,
    )
    optimizer = keras.optimizers.AdamW(
        learning_rate=schedule, weight_decay=weight_decay, beta_2=0.98, epsilon=1e-6
    )
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    return optimizer
