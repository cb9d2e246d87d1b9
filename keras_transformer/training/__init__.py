"""The paper's training recipe: schedule, optimizer, loss, metric and checkpoint averaging."""

from keras_transformer.training.checkpoint_averaging import (
    CheckpointAveraging,
    average_checkpoints,
)
from keras_transformer.training.epoch_seeds import EpochSeeds
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.optimizers import paper_optimizer
from keras_transformer.training.schedules import NoamSchedule

__all__ = [
    "CheckpointAveraging",
    "EpochSeeds",
    "LabelSmoothedCrossEntropy",
    "MaskedAccuracy",
    "NoamSchedule",
    "average_checkpoints",
    "paper_optimizer",
]
