"""A run stopped, checkpointed and restored continues exactly as if it had never stopped: the
same batches (the data stream resumes where the learner stood, mid-epoch) and the same random
draws (the generators' states are in the checkpoint)."""

from __future__ import annotations

import pytest

from offline_rl import Algorithm
from offline_rl.algorithms.cql import CQLConfig
from offline_rl.datasets import make_dataset


def losses(algo: Algorithm, iterations: int) -> list[dict[str, float]]:
    return [{key: value for key, value in algo.train()["learners"]["default_policy"].items()
             if key.endswith("_loss")} for _ in range(iterations)]


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_restored_run_continues_bit_identically(ray_session, tmp_path):
    data = tmp_path / "data"
    make_dataset("Pendulum-v1", data, tier="mixed", episodes=20, seed=0, progress=False)
    # CQL samples actions (torch's generator) in every update.
    config = (CQLConfig().training(num_actions=2).environment("Pendulum-v1")
              .training(train_batch_size_per_learner=128)
              .rl_module(model_config={"fcnet_hiddens": [32]})
              .offline_data(input_=str(data), dataset_num_iters_per_learner=6)
              .debugging(seed=0))
    with config.build() as algo:
        continuous = losses(algo, 6)
        rows_per_epoch = algo.train()["data"]["rows_per_epoch"]
    assert 3 * 6 * 128 < rows_per_epoch < 6 * 6 * 128  # the stop falls mid-epoch, as planned
    with config.build() as algo:
        first = losses(algo, 3)
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
    with Algorithm.from_checkpoint(checkpoint) as algo:
        rest = losses(algo, 3)
    assert first + rest == continuous
