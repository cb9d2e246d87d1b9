"""The translation example's token budget per batch: the paper's on a GPU, a CPU's elsewhere."""

from examples.translation.settings import FULL, GPU_TOKENS_PER_BATCH


def choose_tokens_per_batch(device, requested=None, cpu_default=FULL["tokens_per_batch"]):
    """The tokens per batch and side for `device`, and why.

    - `requested` (`--tokens-per-batch`), when given: it wins on any device.
    - GPU: `GPU_TOKENS_PER_BATCH` (25,000), the paper's batches of about 25,000 source and
      25,000 target tokens (section 5.1).
    - CPU or TPU: `cpu_default`, the QUICK and FULL settings' 4,096, which the runs on
      2 CPU cores were timed and scored with.

    Args:
        device: a `keras_transformer.models.device.DeviceInfo` (`detect_device()`).
        requested: int or `None`, the value of `--tokens-per-batch`.
        cpu_default: int, the default off a GPU. Defaults to FULL's.

    Returns:
        `(tokens_per_batch, reason)`.

    Example:

    >>> from keras_transformer.models.device import DeviceInfo
    >>> choose_tokens_per_batch(DeviceInfo("gpu", "GPU: H100", (9, 0)))[0]
    25000
    >>> choose_tokens_per_batch(DeviceInfo("cpu", "CPU"))[0]
    4096
    >>> choose_tokens_per_batch(DeviceInfo("gpu", "GPU: H100", (9, 0)), requested=8192)
    (8192, 'given by --tokens-per-batch')
    """
    if requested is not None:
        return requested, "given by --tokens-per-batch"
    if device.platform == "gpu":
        return GPU_TOKENS_PER_BATCH, (
            "the default on a GPU: the paper's batches of about 25,000 source and 25,000 "
            "target tokens"
        )
    return cpu_default, f"the default on a {device.platform.upper()}; 25,000 on a GPU"


def warmup_for(tokens_per_batch, warmup_steps, default_tokens):
    """Warmup steps covering as many tokens as `warmup_steps` batches of `default_tokens`.

    Noam's schedule peaks at rate (d_model * warmup)^-0.5: warming up over the same tokens
    in batches k times larger raises the peak by sqrt(k), the square-root rule of batch size
    for Adam, and keeps the warmup within the first epochs of a small corpus (Multi30k
    gives about 25 batches of 25,000 tokens an epoch).

    Args:
        tokens_per_batch: int, the batches' token budget.
        warmup_steps: int, the warmup at `default_tokens`.
        default_tokens: int, the token budget `warmup_steps` was chosen for.

    Returns:
        int, at least 1.

    Example:

    >>> warmup_for(25_000, 600, 4096)
    98
    >>> warmup_for(4096, 600, 4096)
    600
    """
    return max(1, round(warmup_steps * default_tokens / tokens_per_batch))
