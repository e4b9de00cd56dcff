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
#: ``result[EVALUATION_RESULTS][OFFLINE_EVAL_RUNNER_RESULTS]``: the learner's loss on offline
#: data (RLlib 2.60's key).
OFFLINE_EVAL_RUNNER_RESULTS = "offline_eval_runners"
#: ``OfflineEvaluationRunner.run()[module_id][TOTAL_EVAL_LOSS_KEY]``: the module's loss there.
TOTAL_EVAL_LOSS_KEY = "total_eval_loss"
#: ``result[EVALUATION_RESULTS][OFF_POLICY_ESTIMATION][name]``: an off-policy estimate.
OFF_POLICY_ESTIMATION = "off_policy_estimation"
#: ``result[TRAINING_ITERATION]``: the iterations so far (Ray Tune's key). RLlib's
#: ``TRAINING_ITERATION_TIMER`` is the same string: ``result[TIMERS][TRAINING_ITERATION_TIMER]``
#: is the iteration's seconds, and a ``stop`` dict keyed by it stops at that many iterations.
TRAINING_ITERATION = "training_iteration"
TIMERS = "timers"
TRAINING_ITERATION_TIMER = "training_iteration"
#: ``result[TIMERS][TRAINING_STEP_TIMER]``: the mean seconds of one round of updates.
TRAINING_STEP_TIMER = "training_step"
#: ``result[NUM_TRAINING_STEP_CALLS_PER_ITERATION]``: rounds of updates in the iteration.
NUM_TRAINING_STEP_CALLS_PER_ITERATION = "num_training_step_calls_per_iteration"
#: ``result[NUM_ENV_STEPS_SAMPLED_LIFETIME]``: rows read from the data so far (RLlib's offline
#: algorithms count them so: offline, rows sampled are rows trained on).
NUM_ENV_STEPS_SAMPLED_LIFETIME = "num_env_steps_sampled_lifetime"
#: ``result[LEARNER_RESULTS][ALL_MODULES][NUM_ENV_STEPS_TRAINED(_LIFETIME)]``.
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
#: The offline evaluation runners' counts (RLlib's ``ray.rllib.utils.metrics`` names).
NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_MODULE_STEPS_SAMPLED = "num_module_steps_sampled"
NUM_MODULE_STEPS_SAMPLED_LIFETIME = "num_module_steps_sampled_lifetime"
MODULE_SAMPLE_BATCH_SIZE_MEAN = "module_sample_batch_size_mean"
DATASET_NUM_ITERS_EVALUATED = "dataset_num_iters_evaluated"
DATASET_NUM_ITERS_EVALUATED_LIFETIME = "dataset_num_iters_evaluated_lifetime"
NUM_ENV_STEPS_TRAINED_LIFETIME = "num_env_steps_trained_lifetime"
#: RLlib's type of module ids (``ray.rllib.utils.typing.ModuleID``).
ModuleID = str
#: The one module a single-agent algorithm trains.
DEFAULT_MODULE_ID = "default_policy"
#: Figures over all modules, under ``result[LEARNER_RESULTS]``.
ALL_MODULES = "__all_modules__"
#: ``result[LEARNER_RESULTS][module_id][POLICY_LOSS_KEY]`` (``VF_LOSS_KEY``): the policy's
#: (the value function's) loss, where the algorithm has one (RLlib's
#: ``ray.rllib.core.learner.learner`` names).
POLICY_LOSS_KEY = "policy_loss"
VF_LOSS_KEY = "vf_loss"
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
