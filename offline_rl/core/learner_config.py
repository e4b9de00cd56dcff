"""``LearnerConfig``: what the learners need to know, and nothing else.

``AlgorithmConfig.learner_config(module_spec)`` builds it. Algorithms whose loss has
hyperparameters subclass it with typed fields of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_rl.core.schedules import LearningRate
from offline_rl.models.rl_module_spec import RLModuleSpec


@dataclass
class LearnerConfig:
    """Optimizer, placement and iteration settings of the learners (see
    ``AlgorithmConfig.training`` and ``.learners`` for each field).

    Example:
        >>> from offline_rl.models.rl_module_spec import RLModuleSpec
        >>> config = LearnerConfig(learner_class=object, module_spec=RLModuleSpec(), lr=3e-4)
        >>> config.num_learners, config.grad_clip
        (0, None)
    """

    #: The ``Learner`` subclass holding the algorithm's loss.
    learner_class: type
    #: The policy module to train.
    module_spec: RLModuleSpec
    lr: LearningRate = 1e-3
    grad_clip: float | None = None
    grad_clip_by: str = "global_norm"
    num_learners: int = 0
    num_gpus_per_learner: float = 0
    num_cpus_per_learner: float | str = "auto"
    placement_strategy: str = "PACK"
    train_batch_size_per_learner: int = 1024
    dataset_num_iters_per_learner: int | None = None
    #: The data pipeline's ``map_batches`` resources, which the learners' CPUs are sized beside.
    map_batches_kwargs: dict[str, Any] = field(default_factory=dict)
    #: ``iter_batches`` options of each remote learner's shard.
    iter_batches_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
