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
from offline_rl.settings.multi_agent import MultiAgentConfig, multi_agent_problems
from offline_rl.settings.offline_data import OfflineDataConfig, input_problem
from offline_rl.settings.options import Section
from offline_rl.settings.reporting import ReportingConfig
from offline_rl.settings.resources import EnvRunnersConfig, LearnersConfig, ResourcesConfig
from offline_rl.settings.rl_module import RLModuleConfig
from offline_rl.settings.training import TrainingConfig

#: ``to_dict``'s sections (the builder methods), in the order it writes them.
LAYOUT = ("environment", "training", "learners", "resources", "env_runners", "offline_data",
          "evaluation", "reporting", "checkpointing", "rl_module", "multi_agent", "debugging")


@dataclass
class ConfigSections(SectionGroup):
    """One object per section; ``hyperparameters`` is the algorithm's own dataclass.

    Examples:
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
    reporting: ReportingConfig = field(default_factory=ReportingConfig)
    checkpointing: CheckpointingConfig = field(default_factory=CheckpointingConfig)
    rl_module: RLModuleConfig = field(default_factory=RLModuleConfig)
    multi_agent: MultiAgentConfig = field(default_factory=MultiAgentConfig)
    debugging: DebuggingConfig = field(default_factory=DebuggingConfig)

    def problems(self) -> list[tuple[str, str]]:
        """``(field, problem)`` for each invalid field: each section's own checks, then those
        spanning sections."""
        problems = [problem for section in self for problem in section.problems()]
        if not self.multi_agent.is_multi_agent and not self.environment.has_spaces:
            problems.append(("environment",
                             "set env=, or both observation_space= and action_space="))
        evaluation = self.evaluation
        if evaluation.evaluation_interval is not None and self.environment.env is None \
                and not evaluation.off_policy_estimation_methods:
            problems.append(("evaluation_interval", "evaluation needs an env (config."
                             "environment(env=...)) or off_policy_estimation_methods with "
                             "held-out data"))
        samples = input_problem(self.offline_data.input_) is None \
            and self.offline_data.input_spec.sampler_share > 0
        if self.environment.env is None and samples:
            problems.append(("input_", "'sampler' plays the policy in an env: set config."
                             "environment(env=...), or drop 'sampler' from input_"))
        runners = self.env_runners
        if samples and (runners.batch_mode != "complete_episodes"
                        or runners.rollout_fragment_length != "auto"):
            problems.append(("batch_mode" if runners.batch_mode != "complete_episodes"
                             else "rollout_fragment_length",
                             "the 'sampler' of input_ plays whole episodes, as many env steps "
                             "as training_intensity asks; batch_mode='truncate_episodes' and "
                             "rollout_fragment_length size OfflineSingleAgentEnvRunner.sample()"
                             ": leave them unset with 'sampler'"))
        if self.training.training_intensity is not None and not samples:
            problems.append(("training_intensity", "it sets how many online rows are trained "
                             "per env step sampled: mix 'sampler' into input_ (e.g. {path: "
                             "0.8, 'sampler': 0.2}), or leave it unset"))
        problems += multi_agent_problems(self)
        n_step, _ = self.hyperparameters.n_step_returns()
        if isinstance(n_step, int) and n_step > 1 and not self.offline_data.reads_episodes:
            problems.append(("n_step", f"n_step={n_step} needs whole episodes: read them with "
                             "offline_data(input_read_episodes=True) (or SampleBatch JSON with "
                             "input_read_sample_batches=True); tabular rows are single "
                             "transitions (offline-rl convert turns them into episodes)"))
        return problems

    def parts(self, name: str) -> list[Section]:
        """The section objects behind one section of ``to_dict``'s layout."""
        if name == "training":
            return [self.training, self.hyperparameters]
        return [getattr(self, name)]
