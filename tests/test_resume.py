"""A run stopped, checkpointed and restored continues exactly as if it had never stopped: the
same batches (the data stream resumes where the learner stood, mid-epoch) and the same random
draws (the generators' states are in the checkpoint)."""

from __future__ import annotations

import pytest

from offline_rl import Algorithm, BCConfig
from offline_rl.algorithms.cql import CQLConfig
from offline_rl.datasets import make_dataset


def losses(algo: Algorithm, iterations: int) -> list[dict[str, float]]:
    return [{key: value for key, value in algo.train()["learners"]["default_policy"].items()
             if key.endswith("_loss")} for _ in range(iterations)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_a_restored_run_continues_bit_identically(ray_session, tmp_path, env_id):
    data = tmp_path / "data"
    make_dataset(env_id, data, tier="mixed", episodes=10 if env_id == "CartPole-v1" else 20,
                 seed=0, progress=False)
    # CartPole: BC; Pendulum: CQL, which samples actions (torch's generator) in every update.
    config = (BCConfig() if env_id == "CartPole-v1" else CQLConfig().training(num_actions=2))
    config = (config.environment(env_id).training(train_batch_size_per_learner=128)
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
