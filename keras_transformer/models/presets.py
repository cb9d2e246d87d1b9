"""Model sizes for `keras_transformer.models.build`: the paper's two and two CPU-sized ones.

`PRESETS` maps a preset name to the sizes and training settings shared by every
task; `build` turns them into the arguments of `Seq2SeqTransformer`,
`TransformerClassifier` or `TransformerLM`. Its fields:

- `num_layers`: `N`, the number of blocks in each stack. A translation model
  gets `N` encoder and `N` decoder blocks; a classifier `N` encoder blocks; a
  language model `N` decoder blocks.
- `hidden_dim`: `d_model`.
- `intermediate_dim`: `d_ff`, the inner width of the feed-forward layers.
- `num_heads`: `h`, the number of attention heads.
- `dropout`: `P_drop`, on the embeddings and every sub-layer output.
- `label_smoothing`: `ε_ls`, used by the translation and language-modelling
  loss (classification trains without smoothing unless asked).
- `warmup_steps`: the warmup of the Noam learning-rate schedule.
- `learning_rate_scale`: a multiplier on that schedule (`1.0` is the paper's;
  short runs of small models learn faster with a larger one).

`"base"` and `"big"` are the two models of Table 3 of the paper (big uses the
English-German `P_drop` of 0.3). `"tiny"` and `"small"` are not from the paper:
they train in seconds to minutes on a laptop CPU, for tests, examples and
small data sets, and warm up faster because they take far fewer steps.

Example:

>>> from keras_transformer.models import PRESETS
>>> sorted(PRESETS)
['base', 'big', 'small', 'tiny']
>>> PRESETS["base"]["hidden_dim"], PRESETS["base"]["num_layers"]
(512, 6)

References:
    Vaswani et al., "Attention Is All You Need", 2017, Table 3.
"""

PRESETS = {
    # 2 + 2 blocks of width 128: 0.9M weights besides the embeddings.
    "tiny": {
        "num_layers": 2,
        "hidden_dim": 128,
        "intermediate_dim": 512,
        "num_heads": 4,
        "dropout": 0.1,
        "label_smoothing": 0.1,
        "warmup_steps": 400,
        "learning_rate_scale": 1.0,
    },
    # 3 + 3 blocks of width 256: ~5.5M weights besides the embeddings.
    "small": {
        "num_layers": 3,
        "hidden_dim": 256,
        "intermediate_dim": 1024,
        "num_heads": 4,
        "dropout": 0.1,
        "label_smoothing": 0.1,
        "warmup_steps": 1000,
        "learning_rate_scale": 1.0,
    },
    # Table 3, "base": 65M parameters (63.1M here) with a 37000-token shared vocabulary.
    "base": {
        "num_layers": 6,
        "hidden_dim": 512,
        "intermediate_dim": 2048,
        "num_heads": 8,
        "dropout": 0.1,
        "label_smoothing": 0.1,
        "warmup_steps": 4000,
        "learning_rate_scale": 1.0,
    },
    # Table 3, "big": 213M parameters (214.2M here); P_drop 0.3 as for English-German.
    "big": {
        "num_layers": 6,
        "hidden_dim": 1024,
        "intermediate_dim": 4096,
        "num_heads": 16,
        "dropout": 0.3,
        "label_smoothing": 0.1,
        "warmup_steps": 4000,
        "learning_rate_scale": 1.0,
    },
}

# Fields every preset sets; `build` accepts each of them as an override.
PRESET_FIELDS = tuple(PRESETS["base"])
