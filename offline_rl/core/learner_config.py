"""``LearnerConfig``: what the learners need to know, and nothing else.

``AlgorithmConfig.learner_config(module_spec)`` builds it from the config's own section
objects; an algorithm's loss reads its hyperparameters from ``config.hyperparameters`` (its own
dataclass). RLlib's flat names (``config.lr``) read through to the sections.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.settings.debugging import DebuggingConfig
from offline_rl.settings.flat_access import FlatAccess
from offline_rl.settings.hyperparameters import Hyperparameters
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.resources import LearnersConfig
from offline_rl.settings.training import TrainingConfig


@dataclass
class LearnerConfig(FlatAccess):
    """Optimizer, placement and iteration settings of the learners, and the loss's
    hyperparameters (see ``AlgorithmConfig.training`` and ``.learners``).

    Examples:
        >>> from offline_rl.models.rl_module_spec import RLModuleSpec
        >>> config = LearnerConfig(learner_class=object, module_spec=RLModuleSpec(),
        ...                        training=TrainingConfig(lr=3e-4))
        >>> config.learners.num_learners, config.training.grad_clip, config.lr
        (0, None, 0.0003)
    """

    #: The ``Learner`` subclass holding the algorithm's loss.
    learner_class: type
    #: The policy module to train.
    module_spec: RLModuleSpec
    training: TrainingConfig = field(default_factory=TrainingConfig)
    learners: LearnersConfig = field(default_factory=LearnersConfig)
    hyperparameters: Hyperparameters = field(default_factory=Hyperparameters)
    #: The data pipeline's options: its ``map_batches`` resources (which the learners' CPUs
    #: are sized beside), each remote learner's ``iter_batches`` options and the updates per
    #: ``train()``.
    offline_data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    debugging: DebuggingConfig = field(default_factory=DebuggingConfig)
