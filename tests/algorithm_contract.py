"""The contract every registered algorithm keeps, checked in one call (as d3rlpy's
``algo_tester``): it builds from a config, takes its updates, reports finite losses under RLlib's
keys, saves a checkpoint, and comes back from it with the same counters and the same greedy
actions, ready to train on."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np

from offline_rl import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.names import DEFAULT_MODULE_ID, LEARNER_RESULTS

#: Updates of the one training iteration checked.
UPDATES = 2


def check_algorithm(config: AlgorithmConfig, checkpoint: Path) -> None:
    """Builds ``config`` (small batches and networks, seed 0), trains one iteration, saves to
    ``checkpoint`` and restores; fails naming the broken part of the contract."""
    config = (config.copy().training(train_batch_size_per_learner=64)
              .offline_data(dataset_num_iters_per_learner=UPDATES)
              .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))
    with config.build() as algo:
        result = algo.train()
        assert result["training_iteration"] == 1 and algo.num_updates_lifetime == UPDATES
        losses = {key: value for key, value in result[LEARNER_RESULTS][DEFAULT_MODULE_ID].items()
                  if key.endswith("loss")}
        assert losses and all(math.isfinite(value) for value in losses.values()), losses
        space = copy.deepcopy(algo.observation_space)
        space.seed(0)
        observations = np.stack([space.sample() for _ in range(16)])
        actions = algo.module.compute_actions(observations)
        assert actions.shape[0] == 16 and algo.action_space.contains(actions[0]), actions[0]
        path = algo.save_to_path(checkpoint)
    with Algorithm.from_checkpoint(path) as restored:
        assert type(restored.config) is type(config)
        assert (restored.iteration, restored.num_updates_lifetime) == (1, UPDATES)
        np.testing.assert_array_equal(restored.module.compute_actions(observations), actions)
        assert restored.train()["training_iteration"] == 2
        assert restored.num_updates_lifetime == 2 * UPDATES
