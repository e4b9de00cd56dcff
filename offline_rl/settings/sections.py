"""``ConfigSections``: the sections an ``AlgorithmConfig`` is made of, one object each, and
how they map onto ``to_dict``'s layout (one mapping per builder method; ``training`` holds the
algorithm's hyperparameters beside the shared options, as RLlib's ``training()`` takes both)."""

from __future__ import annotations

from dataclasses import dataclass, field

from offline_rl.settings.debugging import DebuggingConfig
from offline_rl.settings.environment import EnvironmentConfig
from offline_rl.settings.evaluation import CheckpointingConfig, EvaluationConfig
from offline_rl.settings.flat_access import SectionGroup
from offline_rl.settings.hyperparameters import Hyperparameters
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.options import Section
from offline_rl.settings.resources import EnvRunnersConfig, LearnersConfig, ResourcesConfig
from offline_rl.settings.rl_module import RLModuleConfig
from offline_rl.settings.training import TrainingConfig

#: ``to_dict``'s sections (the builder methods), in the order it writes them.
LAYOUT = ("environment", "training", "learners", "resources", "env_runners", "offline_data",
          "evaluation", "checkpointing", "rl_module", "debugging")


@dataclass
class ConfigSections(SectionGroup):
    """One object per section; ``hyperparameters`` is the algorithm's own dataclass.

    Example:
        >>> sections = ConfigSections()
        >>> [type(part).__name__ for part in sections.parts("training")]
        ['TrainingConfig', 'Hyperparameters']
    """

    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    hyperparameters: Hyperparameters = field(default_factory=Hyperparameters)
    learners: LearnersConfig = field(default_factory=LearnersConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    env_runners: EnvRunnersConfig = field(default_factory=EnvRunnersConfig)
    offline_data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    checkpointing: CheckpointingConfig = field(default_factory=CheckpointingConfig)
    rl_module: RLModuleConfig = field(default_factory=RLModuleConfig)
    debugging: DebuggingConfig = field(default_factory=DebuggingConfig)

    def parts(self, name: str) -> list[Section]:
        """The section objects behind one section of ``to_dict``'s layout."""
        if name == "training":
            return [self.training, self.hyperparameters]
        return [getattr(self, name)]
