"""RLlib's names for result keys and checkpoint components, so scripts written for RLlib read
offline-rl's results and checkpoints unchanged.

Examples:
    >>> from offline_rl import EPISODE_RETURN_MEAN, ENV_RUNNER_RESULTS, EVALUATION_RESULTS
    >>> f"{EVALUATION_RESULTS}/{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"
    'evaluation/env_runners/episode_return_mean'
"""

from __future__ import annotations

#: ``result[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]`` is the evaluation's
#: mean return.
EVALUATION_RESULTS = "evaluation"
ENV_RUNNER_RESULTS = "env_runners"
EPISODE_RETURN_MEAN = "episode_return_mean"
#: ``result[LEARNER_RESULTS][DEFAULT_MODULE_ID]`` holds the loss metrics.
LEARNER_RESULTS = "learners"
#: ``result[EVALUATION_RESULTS][OFFLINE_EVAL_RESULTS]``: the loss terms on held-out data.
OFFLINE_EVAL_RESULTS = "offline_eval_runner_results"
#: ``OfflineEvaluationRunner.run()[module_id][TOTAL_EVAL_LOSS_KEY]``: the module's loss there.
TOTAL_EVAL_LOSS_KEY = "total_eval_loss"
#: ``result[EVALUATION_RESULTS][OFF_POLICY_ESTIMATION][name]``: an off-policy estimate.
OFF_POLICY_ESTIMATION = "off_policy_estimation"
#: RLlib's type of module ids (``ray.rllib.utils.typing.ModuleID``).
ModuleID = str
#: The one module a single-agent algorithm trains.
DEFAULT_MODULE_ID = "default_policy"
#: Figures over all modules, under ``result[LEARNER_RESULTS]``.
ALL_MODULES = "__all_modules__"
#: Checkpoint components ``Algorithm.restore_from_path(path, component=...)`` loads: the
#: learners' state (module weights and optimizer), or the module's weights only.
COMPONENT_LEARNER_GROUP = "learner_group"
COMPONENT_LEARNER = "learner"
COMPONENT_RL_MODULE = "rl_module"
#: RLlib's old name of ``DEFAULT_MODULE_ID`` (``ray.rllib.policy.sample_batch``).
DEFAULT_POLICY_ID = DEFAULT_MODULE_ID
#: The key of the env's own spaces in ``OfflineData.spaces`` (``ray.rllib.env``), beside one
#: key per module.
INPUT_ENV_SPACES = "__env__"
