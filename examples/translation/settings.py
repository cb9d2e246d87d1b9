"""The translation example's QUICK and FULL settings.

In a module of their own, which imports nothing, so that `benchmarks/translation_step.py`
reads the FULL model's settings from here without importing the example.
"""

# Under 45 minutes of training on 2 CPU cores (see RESULTS.md): 20 epochs since the
# training step became 1.21x faster (issue #15); 17 fitted the budget before.
FULL = dict(
    train_pairs=None,
    eval_pairs=None,
    vocabulary_size=8000,
    preset="small",
    norm_first=True,
    dropout=0.2,
    epochs=20,
    tokens_per_batch=4096,
    warmup_steps=600,
    learning_rate_scale=1.25,
    beam_size=5,
    average_checkpoints=10,
    checkpoint_every=64,
    min_tokens_per_batch=1024,
    subword_dropout=0.0,
)
# About four minutes of training on 2 CPU cores: every pair, two epochs, a 2 + 2 model with
# the tiny preset's dropout (`None`: the preset's value).
QUICK = dict(
    FULL,
    eval_pairs=200,
    vocabulary_size=4000,
    preset="tiny",
    dropout=None,
    epochs=2,
    warmup_steps=200,
    learning_rate_scale=1.0,
    beam_size=2,
    average_checkpoints=1,
    checkpoint_every=None,
    min_tokens_per_batch=0,
)
# The default `tokens_per_batch` of both runs on a GPU (`tokens_per_batch.py`): the paper's
# batches held "approximately 25000 source tokens and 25000 target tokens" (Vaswani et al.,
# 2017, section 5.1).
GPU_TOKENS_PER_BATCH = 25_000
