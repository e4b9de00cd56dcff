"""The ``learners``, ``resources`` and ``env_runners`` sections: the Ray actors an algorithm
starts and what each reserves."""

from __future__ import annotations

from dataclasses import dataclass

from offline_rl.settings.options import (
    A_NUMBER_ABOVE_0,
    A_NUMBER_AT_LEAST_0,
    AN_INT_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    AUTO_OR_A_NUMBER_AT_LEAST_0,
    Rule,
    Section,
    one_of,
    option,
    optional,
)

PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


@dataclass
class LearnersConfig(Section):
    """See ``AlgorithmConfig.learners``.

    Examples:
        >>> LearnersConfig(num_gpus_per_learner=1, num_cpus_per_learner=2).problems()
        [('num_cpus_per_learner', 'set either num_gpus_per_learner or num_cpus_per_learner')]
    """

    #: 0: one learner in this process; N >= 1: N Ray actors, one ``streaming_split`` shard each.
    num_learners: int = option(0, AN_INT_AT_LEAST_0)
    #: GPUs per learner (fractions share one).
    num_gpus_per_learner: float = option(0, A_NUMBER_AT_LEAST_0)
    #: CPUs per learner; ``"auto"``: 0 with a GPU, else 1 when that fits beside the data
    #: pipeline, else 0.
    num_cpus_per_learner: float | str = option("auto", AUTO_OR_A_NUMBER_AT_LEAST_0)
    #: How the learners' placement group spreads them over nodes.
    placement_strategy: str = option("PACK", one_of(*PLACEMENT_STRATEGIES))

    def joint_problems(self) -> list[tuple[str, str]]:
        """A learner is sized by its GPUs or by its CPUs, not both."""
        if self.num_gpus_per_learner and self.num_cpus_per_learner != "auto":
            return [("num_cpus_per_learner",
                     "set either num_gpus_per_learner or num_cpus_per_learner")]
        return []


@dataclass
class ResourcesConfig(Section):
    """See ``AlgorithmConfig.resources``."""

    #: CPUs the algorithm's own process reserves as a Ray Tune trial; ``"auto"``: 1, or less
    #: when the trial would not fit the cluster (shared with the PreLearners).
    num_cpus_for_main_process: float | str = option("auto", AUTO_OR_A_NUMBER_AT_LEAST_0)


@dataclass
class EnvRunnersConfig(Section):
    """See ``AlgorithmConfig.env_runners``."""

    #: Ray actors that play the policy when recording; 0 (RLlib's: no remote env runners, the
    #: driver's own plays) plays with one (``runner_actors``); ``OfflineSingleAgentEnvRunner``
    #: plays in the process that builds it whatever this is.
    num_env_runners: int = option(1, AN_INT_AT_LEAST_0)
    #: Vectorized envs per actor.
    num_envs_per_env_runner: int = option(1, AN_INT_AT_LEAST_1)
    #: CPUs per actor (evaluation runners too); ``"auto"``: 1 where the runners fit beside the
    #: rest of the run, else 0 (they share the CPUs).
    num_cpus_per_env_runner: float | str = option("auto", AUTO_OR_A_NUMBER_AT_LEAST_0)
    #: How ``OfflineSingleAgentEnvRunner.sample(num_timesteps=n)`` ends (RLlib's option):
    #: ``"complete_episodes"`` plays whole episodes until at least ``n`` steps;
    #: ``"truncate_episodes"`` plays exactly ``n`` steps, the episodes still running then cut
    #: and written as truncated. Episode counts (``sample(num_episodes=...)``,
    #: ``Recorder.record``, ``evaluate()``) are always whole episodes.
    batch_mode: str = option("complete_episodes", one_of("complete_episodes",
                                                         "truncate_episodes"))
    #: Env steps per env of ``OfflineSingleAgentEnvRunner.sample()`` called without
    #: ``num_timesteps`` or ``num_episodes`` (RLlib's option); ``"auto"``: RLlib's, the
    #: ``train_batch_size_per_learner`` shared over the env runners and their envs.
    rollout_fragment_length: int | str = option("auto", Rule(
        "'auto' or an int >= 1", lambda value: value == "auto" or AN_INT_AT_LEAST_1.holds(value)))
    #: Env steps at which an episode is cut, ending truncated (as gymnasium's ``TimeLimit``
    #: ends it), wherever offline-rl plays the env (sampler, evaluation, recording); ``None``:
    #: the env spec's ``max_episode_steps``, where it has one. Cut episodes are counted and
    #: a warning says so.
    max_episode_steps: int | None = option(None, optional(AN_INT_AT_LEAST_1,
                                                          "None (the env spec's)"))
    #: Seconds an episode of the sampler's or a recorder's env runners may run without
    #: ending before they raise ``EnvError`` (RLlib's option, which bounds a runner's
    #: ``sample()`` call; an env whose episodes never end would make it wait forever);
    #: ``None``: no limit.
    sample_timeout_s: float | None = option(60.0, optional(A_NUMBER_ABOVE_0,
                                                           "None (no limit)"))

    @property
    def runner_actors(self) -> int:
        """The env runner actors a ``Recorder`` or the sampler starts: ``num_env_runners``,
        and one for 0."""
        return max(1, self.num_env_runners)
