"""``OnlineTraining``: the ``"sampler"`` share of ``input_`` in an ``Algorithm``'s iterations.

Every ``train()``, before the learners update: the episodes of the round of sampling started
by the previous ``train()`` are collected (the first ``train()`` plays a round first and waits
for it) and handed to every learner's online replay buffer (``LearnerGroup.
add_online_episodes``; each learner then samples its own online rows, ``data.online_rows``);
then the next round starts with the learners' current weights and plays while the learners
update. So the weights are synced to the env runners once per ``train()``, and the episodes
trained on were played with the weights of one iteration before (as RLlib's
``evaluation_parallel_to_training``); ``result["env_runners"]["weights_version"]`` says which
(the learners' optimizer steps when the round started).

A round plays about the online rows the iteration trains on: ``dataset_num_iters_per_learner``
batches' share of ``train_batch_size_per_learner`` (one batch's worth without a planned count),
divided by ``training_intensity`` (the online rows trained per env step sampled).
Checkpoints keep the lifetime counts; the online replay buffers restart empty on restore (the
first ``train()`` after it fills them again before any update).
"""

from __future__ import annotations

from typing import Any

from offline_rl.core.learner_group import LearnerGroup
from offline_rl.data.pipeline.offline_data import OfflineData
from offline_rl.data.prelearner.module_weights import numpy_state
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.recording.online_sampler import OnlineSampler


def env_steps_per_round(data_config: Any) -> int:
    """The env steps a round of sampling plays (at least, all runners together) for a
    ``DataConfig``: the online rows one iteration trains on, over ``training_intensity``.

    Examples:
        >>> import gymnasium as gym
        >>> from offline_rl import IQLConfig
        >>> spaces = (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)))
        >>> config = (IQLConfig().training(train_batch_size_per_learner=256)
        ...           .offline_data(input_={"data/medium": 0.5, "sampler": 0.5},
        ...                         dataset_num_iters_per_learner=100))
        >>> env_steps_per_round(config.data_config(spaces))
        12800
        >>> env_steps_per_round(config.training(training_intensity=64).data_config(spaces))
        200
    """
    planned = data_config.offline_data.dataset_num_iters_per_learner or 1
    training = data_config.training
    online_rows = data_config.sampler_weight * training.train_batch_size_per_learner * planned
    return max(1, round(online_rows / (training.training_intensity or 1)))


class OnlineTraining:
    """The sampler and its place in each iteration (see the module's notes)."""

    def __init__(self, config: Any, learner_group: LearnerGroup, offline_data: OfflineData,
                 module_spec: RLModuleSpec):
        data_config = offline_data.config
        learner_group.mix_online(data_config)
        #: Env steps each round plays (at least), all runners together.
        self.env_steps_per_round = env_steps_per_round(data_config)
        self.learner_group = learner_group
        self.sampler = OnlineSampler(config.recorder_config(), module_spec,
                                     record=bool(config.sections.offline_data.output),
                                     num_cpus=learner_group.resources.sampler_runners.cpus)

    @classmethod
    def build(cls, config: Any, learner_group: LearnerGroup, offline_data: OfflineData,
              module_spec: RLModuleSpec) -> OnlineTraining | None:
        """The online training of ``config``, or ``None`` when ``input_`` has no sampler."""
        if not getattr(offline_data.config, "sampler_weight", 0):
            return None
        return cls(config, learner_group, offline_data, module_spec)

    def before_update(self) -> dict[str, Any]:
        """Hands the learners the last round's episodes and starts the next round; returns
        the round's figures (``result["env_runners"]``)."""
        group = self.learner_group
        weights = numpy_state(group.module)
        if not self.sampler.sampling:
            self.sampler.start(weights, group.num_steps, self.env_steps_per_round)
        episodes, figures = self.sampler.collect()
        group.add_online_episodes(episodes)
        self.sampler.start(weights, group.num_steps, self.env_steps_per_round)
        return figures

    def state(self) -> dict[str, int]:
        """What a checkpoint keeps: the lifetime counts."""
        return self.sampler.state()

    def set_state(self, state: dict[str, int]) -> None:
        """Restores ``state()``."""
        self.sampler.set_state(state)

    def stop(self) -> list[str]:
        """Stops the env runners; returns the files they recorded."""
        return self.sampler.stop()
