import keras
import numpy as np
import pytest

from keras_transformer.training import NoamSchedule, paper_optimizer

pytestmark = pytest.mark.backend_agnostic


def test_hyper_parameters():
    optimizer = paper_optimizer(model_dim=512)
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert optimizer.beta_1 == 0.9
    assert optimizer.beta_2 == 0.98
    assert optimizer.epsilon == 1e-9
    schedule = optimizer._learning_rate  # the schedule object, not its current value
    assert isinstance(schedule, NoamSchedule)
    assert schedule.get_config() == {"model_dim": 512, "warmup_steps": 4000, "scale": 1.0}
    # A fresh optimizer (iterations 0) is at the paper's step 1: 512^-0.5 * 4000^-1.5.
    np.testing.assert_allclose(float(optimizer.learning_rate), 1.7469281e-07, rtol=1e-6)


def test_schedule_arguments_and_adam_keywords_pass_through():
    optimizer = paper_optimizer(model_dim=1024, warmup_steps=8000, scale=2.0, global_clipnorm=1.0)
    assert optimizer._learning_rate.get_config() == {
        "model_dim": 1024,
        "warmup_steps": 8000,
        "scale": 2.0,
    }
    assert optimizer.global_clipnorm == 1.0


def test_serialization_round_trip():
    optimizer = paper_optimizer(model_dim=256, warmup_steps=100, scale=0.5)
    revived = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(revived, keras.optimizers.Adam)
    assert isinstance(revived._learning_rate, NoamSchedule)
    assert revived._learning_rate.get_config() == optimizer._learning_rate.get_config()
    assert (revived.beta_1, revived.beta_2, revived.epsilon) == (0.9, 0.98, 1e-9)


def test_fixed_hyper_parameters_are_rejected():
    with pytest.raises(ValueError, match="fixes `beta_2`"):
        paper_optimizer(512, beta_2=0.999)
    with pytest.raises(ValueError, match="`model_dim` must be a positive integer"):
        paper_optimizer(0)
