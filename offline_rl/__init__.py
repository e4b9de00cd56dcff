"""offline-rl: train RL policies from logged experience, streamed from Parquet through Ray Data
into torch learners, with RLlib's offline API.

Names are imported on first use, so that Ray Data workers, which unpickle configs and
PreLearners, never import torch or the algorithm code they do not run.

Examples:
    >>> from offline_rl import BCConfig, Columns
    >>> Columns.OBS
    'obs'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

from offline_rl.algorithms.registry import BUILT_IN_ALGORITHMS
from offline_rl.columns import SCHEMA, Columns
from offline_rl.names import (
    ALL_MODULES,
    COMPONENT_LEARNER,
    COMPONENT_LEARNER_GROUP,
    COMPONENT_RL_MODULE,
    DATASET_NUM_ITERS_EVALUATED,
    DATASET_NUM_ITERS_EVALUATED_LIFETIME,
    DEFAULT_MODULE_ID,
    DEFAULT_POLICY_ID,
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    INPUT_ENV_SPACES,
    LEARNER_RESULTS,
    MODULE_SAMPLE_BATCH_SIZE_MEAN,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_TRAINED,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
    NUM_MODULE_STEPS_SAMPLED,
    NUM_MODULE_STEPS_SAMPLED_LIFETIME,
    OFFLINE_EVAL_RUNNER_RESULTS,
    POLICY_LOSS_KEY,
    TIMERS,
    TOTAL_EVAL_LOSS_KEY,
    TRAINING_ITERATION,
    TRAINING_ITERATION_TIMER,
    TRAINING_STEP_TIMER,
    VF_LOSS_KEY,
    ModuleID,
)
from offline_rl.nested_keys import flatten_dict, unflatten_dict

__version__ = "0.1.0"

#: The names imported on first use, and their modules: each built-in algorithm's config and
#: ``Algorithm`` subclass (``BCConfig``, ``BC``) come from the registry's table.
_LAZY = {
    "AlgorithmConfig": "offline_rl.algorithms.algorithm_config",
    "Algorithm": "offline_rl.algorithms.algorithm",
    "MultiAgentAlgorithm": "offline_rl.algorithms.multi_agent_algorithm",
    "OfflineEvaluationRunner": "offline_rl.algorithms.offline_evaluation_runner",
    "OfflinePolicyEvaluationRunner": "offline_rl.algorithms.offline_policy_evaluation_runner",
    "OfflineEvaluationRunnerGroup": "offline_rl.algorithms.offline_evaluation_runner_group",
    **{name: module for algorithm, module in BUILT_IN_ALGORITHMS.items()
       for name in (f"{algorithm}Config", algorithm)},
    "BCCatalog": "offline_rl.algorithms.bc.bc_catalog",
    "DefaultBCTorchRLModule": "offline_rl.algorithms.bc.default_bc_torch_rl_module",
    "Learner": "offline_rl.core.learner",
    "LearnerGroup": "offline_rl.core.learner_group",
    "OfflineData": "offline_rl.data.pipeline.offline_data",
    "OfflinePreLearner": "offline_rl.data.prelearner.prelearner",
    "InputReader": "offline_rl.data.source.input_api",
    "JsonReader": "offline_rl.data.source.json_reader",
    "ShuffledInput": "offline_rl.data.source.input_api",
    "register_input": "offline_rl.data.source.input_api",
    "IOContext": "offline_rl.data.source.io_context",
    "OutputWriter": "offline_rl.recording.output_writer",
    "NoopOutput": "offline_rl.recording.output_writer",
    "SingleAgentEpisode": "offline_rl.episodes.episode",
    "EpisodeType": "offline_rl.episodes.episode",
    "MultiAgentEpisode": "offline_rl.episodes.multi_agent_episode",
    "EpisodeReplayBuffer": "offline_rl.episodes.replay_buffer",
    "InfiniteLookbackBuffer": "offline_rl.episodes.lookback",
    "RLModuleSpec": "offline_rl.models.rl_module_spec",
    "MultiRLModule": "offline_rl.models.multi_rl_module",
    "MultiRLModuleSpec": "offline_rl.models.multi_rl_module",
    "DefaultModelConfig": "offline_rl.models.model_config",
    "RLModule": "offline_rl.models.rl_module",
    "TorchRLModule": "offline_rl.models.rl_module",
    "MLPEncoderConfig": "offline_rl.models.mlp_configs",
    "MLPHeadConfig": "offline_rl.models.mlp_configs",
    "ENCODER_OUT": "offline_rl.models.mlp_configs",
    "update_global_seed_if_necessary": "offline_rl.core.random_states",
    "ExperienceLogger": "offline_rl.recording.experience_logger",
    "OfflineSingleAgentEnvRunner": "offline_rl.recording.offline_env_runner",
    "JsonWriter": "offline_rl.recording.json_writer",
    "SampleBatch": "offline_rl.episodes.sample_batch",
    "MultiAgentBatch": "offline_rl.episodes.sample_batch",
    "SampleBatchBuilder": "offline_rl.recording.sample_batch_builder",
    "get_preprocessor": "offline_rl.recording.preprocessors",
    "override": "offline_rl.annotations",
    "add_rllib_example_script_args": "offline_rl.algorithms.example_scripts",
    "run_rllib_example_script_experiment": "offline_rl.algorithms.example_scripts",
    "should_stop": "offline_rl.algorithms.example_scripts",
}

__all__ = [
    "ALL_MODULES",
    "COMPONENT_LEARNER",
    "COMPONENT_LEARNER_GROUP",
    "COMPONENT_RL_MODULE",
    "DATASET_NUM_ITERS_EVALUATED",
    "DATASET_NUM_ITERS_EVALUATED_LIFETIME",
    "DEFAULT_MODULE_ID",
    "DEFAULT_POLICY_ID",
    "ENV_RUNNER_RESULTS",
    "EPISODE_RETURN_MEAN",
    "EVALUATION_RESULTS",
    "INPUT_ENV_SPACES",
    "LEARNER_RESULTS",
    "MODULE_SAMPLE_BATCH_SIZE_MEAN",
    "NUM_ENV_STEPS_SAMPLED",
    "NUM_ENV_STEPS_SAMPLED_LIFETIME",
    "NUM_ENV_STEPS_TRAINED",
    "NUM_ENV_STEPS_TRAINED_LIFETIME",
    "NUM_MODULE_STEPS_SAMPLED",
    "NUM_MODULE_STEPS_SAMPLED_LIFETIME",
    "OFFLINE_EVAL_RUNNER_RESULTS",
    "POLICY_LOSS_KEY",
    "TOTAL_EVAL_LOSS_KEY",
    "SCHEMA",
    "TIMERS",
    "TRAINING_ITERATION",
    "TRAINING_ITERATION_TIMER",
    "TRAINING_STEP_TIMER",
    "VF_LOSS_KEY",
    "ModuleID",
    "Columns",
    "flatten_dict",
    "unflatten_dict",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'offline_rl' has no attribute {name!r}")


def _register_with_tune() -> None:
    # Importing the module registers the algorithms (also when a Ray worker imports the
    # module first, to unpickle a trainable, and the import of ray.tune lands here).
    importlib.import_module("offline_rl.algorithms.trainable")


class _RegisterWithTuneOnImport(importlib.abc.MetaPathFinder):
    """Registers offline-rl's algorithms with Ray Tune right after ``ray.tune`` is imported, so
    that ``tune.Tuner("BC", ...)`` works in whichever order the two are imported, and a
    process that never imports Tune never loads it."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "ray.tune":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def load_and_register(module: ModuleType) -> None:
            load(module)
            _register_with_tune()

        spec.loader.exec_module = load_and_register
        return spec


if "ray.tune" in sys.modules:
    _register_with_tune()
else:
    sys.meta_path.insert(0, _RegisterWithTuneOnImport())
