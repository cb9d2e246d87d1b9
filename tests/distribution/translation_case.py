"""The model and batches the multi-device tests train, on a mesh and on one device."""

import numpy as np

import keras_transformer as kt

VOCABULARY = 64
# 1 + 1 blocks keep compiles short; without dropout, a mesh and one device take the same steps.
CONFIG = dict(
    source_vocabulary_size=VOCABULARY,
    num_layers=1,
    hidden_dim=32,
    intermediate_dim=64,
    dropout=0.0,
)
BATCH, STEPS = 16, 3
# float32 losses after 3 steps agree to ~1e-6 between meshes; 1e-4 leaves room for
# reduction order and stays far below a wrong step (which moves the loss by ~1e-2).
LOSS_TOLERANCE = 1e-4


def batches():
    rng = np.random.default_rng(0)
    source = rng.integers(3, VOCABULARY, (BATCH * STEPS, 8)).astype("int32")
    target = rng.integers(3, VOCABULARY, (BATCH * STEPS, 7)).astype("int32")
    decoder = np.concatenate([np.ones_like(target[:, :1]), target[:, :-1]], axis=1)
    return {"encoder_token_ids": source, "decoder_token_ids": decoder}, target


def build(mesh=None, **overrides):
    config = dict(CONFIG, **overrides)
    return kt.models.build("translation", preset="tiny", precision="float32", mesh=mesh, **config)
