"""AlgorithmConfig: builders, validation messages, dict/YAML round trip."""

from __future__ import annotations

import inspect
from pathlib import Path

import gymnasium as gym
import pytest

from connectors import BatchIndividualItems, ConnectorV2
from offline_rl import AlgorithmConfig, BCConfig
from offline_rl.algorithms import get_algorithm_config_class, registered_algorithms
from offline_rl.algorithms.checkpoint_schedule import PeriodicCheckpoints
from offline_rl.algorithms.flat_config import OLD_STACK_KEYS
from offline_rl.errors import ConfigError
from offline_rl.settings.sections import LAYOUT


def valid() -> BCConfig:
    return BCConfig().environment("CartPole-v1").offline_data(input_="data/x")


def test_builders_chain_and_set_fields():
    config = valid().training(lr=0.01, grad_clip=1.0).debugging(seed=3)
    assert (config.lr, config.grad_clip, config.seed) == (0.01, 1.0, 3)
    assert config.training(grad_clip=None).grad_clip is None
    valid().validate()


def builder_keywords(config: AlgorithmConfig, method: str) -> set[str]:
    """The keywords a builder takes, through the overrides that pass ``**kwargs`` on."""
    names: set[str] = set()
    for cls in type(config).__mro__:
        if method in vars(cls):
            names |= {name for name, parameter in
                      inspect.signature(vars(cls)[method]).parameters.items()
                      if name != "self" and parameter.kind is not parameter.VAR_KEYWORD}
    return names


@pytest.mark.parametrize("algorithm", registered_algorithms())
def test_each_option_is_a_section_field_and_a_builder_keyword(algorithm):
    # An option added to a section but not to its builder (or the reverse) fails here; a
    # builder may also take old-stack names (evaluation(evaluation_num_workers=...)) and, as
    # RLlib's do, another section's option (CQL's training(clip_actions=...)).
    config = get_algorithm_config_class(algorithm)()
    every_option = {name for section in LAYOUT for name in config.section_options(section)}
    for section in LAYOUT:
        options = set(config.section_options(section))
        keywords = builder_keywords(config, section) - (
            (set(OLD_STACK_KEYS) | every_option) - options)
        assert keywords == options, section
    names = [name for section in LAYOUT for name in config.section_options(section)]
    assert len(names) == len(set(names))  # flat names (config.lr) are unambiguous


def test_an_option_is_one_field_read_and_written_through_its_section():
    config = valid().training(train_batch_size_per_learner=64)
    assert config.sections.training.train_batch_size_per_learner == 64
    config.train_batch_size_per_learner = 32  # RLlib's flat attribute access
    assert config.sections.training.train_batch_size_per_learner == 32
    spaces = (gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
    data, learners = config.data_config(spaces), config.learner_config(
        config.get_rl_module_spec(*spaces))
    assert data.training is learners.training is config.sections.training  # not copies
    with pytest.raises(AttributeError, match="has no attribute 'train_batch_size'"):
        _ = config.train_batch_size


@pytest.mark.parametrize("change, field", [
    (lambda c: c.training(lr=0), "lr"),
    (lambda c: c.training(train_batch_size_per_learner=0), "train_batch_size_per_learner"),
    (lambda c: c.training(grad_clip_by="max"), "grad_clip_by"),
    (lambda c: c.offline_data(input_=None), "input_"),
    (lambda c: c.offline_data(map_batches_kwargs={"batch_size": 8}), "map_batches_kwargs"),
    (lambda c: c.offline_data(iter_batches_kwargs={"drop_last": True}), "iter_batches_kwargs"),
    (lambda c: c.offline_data(dataset_num_iters_per_learner=0), "dataset_num_iters_per_learner"),
    (lambda c: c.evaluation(evaluation_duration_unit="timesteps"), "evaluation_duration_unit"),
    (lambda c: c.rl_module(model_config={"fcnet_activation": "sigmoid"}), "model_config"),
    (lambda c: c.rl_module(model_config={"hidden": [8]}), "model_config"),
    (lambda c: c.environment(env=None), "environment"),
    (lambda c: c.learners(num_gpus_per_learner=1, num_cpus_per_learner=2),
     "num_cpus_per_learner"),
    (lambda c: c.learners(num_learners=-1), "num_learners"),
    (lambda c: c.learners(num_cpus_per_learner="many"), "num_cpus_per_learner"),
    (lambda c: c.learners(placement_strategy="RANDOM"), "placement_strategy"),
    (lambda c: c.offline_data(prelearner_module_synch_period=0),
     "prelearner_module_synch_period"),
])
def test_validation_names_the_field(change, field):
    with pytest.raises(ConfigError, match=rf"\n  {field}: "):
        change(valid()).validate()


@pytest.mark.parametrize("change, message", [
    (lambda c: c.training(lr=float("nan")), r"lr: must be a finite number > 0, got nan"),
    (lambda c: c.training(lr=float("inf")), r"lr: must be a finite number > 0, got inf"),
    (lambda c: c.training(lr=[[0, 1e-3], [100, float("nan")]]),
     r"lr: a schedule's timesteps and learning rates are finite numbers"),
    (lambda c: c.training(grad_clip=float("inf")), r"grad_clip: must be None or a number > 0"),
    (lambda c: c.training(train_batch_size_per_learner=10**12),
     r"train_batch_size_per_learner: must be an int from 1 to 16,777,216 \(settings\.training\."
     r"MAX_TRAIN_BATCH_SIZE\), got 1000000000000"),
    (lambda c: c.rl_module(model_config={"fcnet_hiddens": [0]}),
     r"model_config: model_config fcnet_hiddens=\[0\]: give a list of layer sizes, each an int "
     r">= 1"),
    (lambda c: c.rl_module(model_config={"fcnet_hiddens": [64, -8]}), r"fcnet_hiddens=\[64, -8\]"),
    (lambda c: c.rl_module(model_config={"head_fcnet_hiddens": 32}), r"head_fcnet_hiddens=32"),
    (lambda c: c.debugging(seed="zero"), r"seed: must be None or an int >= 0, got 'zero'"),
    (lambda c: c.offline_data(map_batches_kwargs={"concurrency": 1.5}),
     r"map_batches_kwargs: concurrency must be an int >= 1 \(PreLearner actors\) or a \[min, "
     r"max\] range of them, got 1\.5"),
    (lambda c: c.offline_data(map_batches_kwargs={"concurrency": [3, 1]}), r"got \[3, 1\]"),
    (lambda c: c.offline_data(input_=3), r"input_: must be a path or URI \(str\) or a list of "
                                         r"them, or a callable \(IOContext\) -> InputReader, "
                                         r"got 3"),
    (lambda c: c.offline_data(input_={"data/a": 0.7, "data/b": -0.3}),
     r"input_: source 'data/b': the weight must be a finite number above 0, got -0.3"),
    (lambda c: c.offline_data(input_read_schema="obs"),
     r"input_read_schema: must map offline-rl's column names to the data's"),
    (lambda c: c.offline_data(input_read_schema={"state": "obs", "act": "actions"}),
     r"input_read_schema: has the key\(s\) \['state', 'act'\], which name no field.*the "
     r"mapping is reversed\? give \{'obs': 'state', 'actions': 'act'\}"),
    (lambda c: c.offline_data(input_read_schema={"terminated": "done_flag"}),
     r"'terminated': did you mean 'terminateds'\?"),
    (lambda c: c.offline_data(input_read_method_kwargs={"colums": ["obs"]}),
     r"input_read_method_kwargs: ray.data.read_parquet takes no \['colums'\]; it takes "
     r"\[.*'columns'"),
    (lambda c: c.rl_module(rl_module_spec={"module_class": "x:Y"}),
     r"rl_module_spec: must be None, an RLModuleSpec or a MultiRLModuleSpec of them by "
     r"module id"),
])
def test_values_that_would_train_wrong_or_blow_up_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        change(valid()).validate()


def test_read_kwargs_pyarrow_takes_pass_the_check():
    valid().offline_data(input_read_method_kwargs={"columns": ["obs"], "use_threads": False}
                         ).validate()
    valid().offline_data(input_read_method="read_json",
                         input_read_method_kwargs={"lines": True}).validate()


@pytest.mark.parametrize("options, message", [
    ({"output": ["a/", "b/"]}, r"output: must be one path"),
    ({"output": "out/", "output_write_method": "write_csv"}, r"output_write_method: must be one"),
    ({"output": "out/", "output_write_method": "write_json"}, r"written as Parquet"),
    ({"output_max_rows_per_file": 0}, r"output_max_rows_per_file: must be None or an int"),
])
def test_output_options_are_checked(options, message):
    with pytest.raises(ConfigError, match=message):
        valid().offline_data(**options).validate()


def test_env_runner_options_take_rllibs_values_and_the_sampler_plays_whole_episodes():
    valid().env_runners(batch_mode="truncate_episodes", rollout_fragment_length=1000,
                        num_env_runners=0).validate()
    with pytest.raises(ConfigError, match=r"batch_mode: must be one of \('complete_episodes', "
                                          r"'truncate_episodes'\), got 'fragments'"):
        valid().env_runners(batch_mode="fragments").validate()
    with pytest.raises(ConfigError, match=r"rollout_fragment_length: must be 'auto' or an int "
                                          r">= 1, got 0"):
        valid().env_runners(rollout_fragment_length=0).validate()
    with pytest.raises(ConfigError, match=r"num_env_runners: must be an int >= 0, got -1"):
        valid().env_runners(num_env_runners=-1).validate()
    sampling = valid().environment("CartPole-v1").offline_data(
        input_={"data/cartpole": 0.5, "sampler": 0.5})
    with pytest.raises(ConfigError, match=r"batch_mode: the 'sampler' of input_ plays whole "
                                          r"episodes.*OfflineSingleAgentEnvRunner"):
        sampling.copy().env_runners(batch_mode="truncate_episodes").validate()
    with pytest.raises(ConfigError, match=r"rollout_fragment_length: the 'sampler'"):
        sampling.copy().env_runners(rollout_fragment_length=10).validate()


def test_model_config_dict_is_rllibs_older_name_of_model_config():
    config = valid().rl_module(model_config_dict={"fcnet_hiddens": [32],
                                                  "fcnet_activation": "linear",
                                                  "vf_share_layers": True})
    assert config.model_config["fcnet_hiddens"] == [32]
    with pytest.raises(ConfigError, match=r"model_config_dict=\.\.\.\) is RLlib's older name "
                                          r"of model_config: give one of them"):
        valid().rl_module(model_config={}, model_config_dict={})


def test_a_default_model_config_keeps_the_algorithms_defaults_it_does_not_change():
    from offline_rl import IQLConfig
    from offline_rl.models.model_config import DefaultModelConfig

    # RLlib's pendulum_iql.py form: only the layer sizes change; IQL's relu stays.
    model = IQLConfig().rl_module(model_config=DefaultModelConfig(
        fcnet_hiddens=[64], fcnet_activation="tanh")).model_config
    assert model["fcnet_hiddens"] == [64] and model["fcnet_activation"] == "relu"
    assert model["free_log_std"] is True
    # A dict names every key it sets, a class default included.
    assert IQLConfig().rl_module(model_config={"fcnet_activation": "tanh"}).model_config[
        "fcnet_activation"] == "tanh"


def test_every_error_is_reported_at_once():
    with pytest.raises(ConfigError) as error:
        valid().training(lr=-1, train_batch_size_per_learner=0).validate()
    assert "lr:" in str(error.value) and "train_batch_size_per_learner:" in str(error.value)


def test_spaces_without_env_are_enough():
    BCConfig().environment(observation_space=gym.spaces.Box(-1, 1, (3,)),
                           action_space=gym.spaces.Discrete(2)).offline_data(
        input_="x").validate()


def test_unknown_builder_keyword_is_an_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'learning_rate'"):
        valid().training(learning_rate=0.1)


def test_dict_and_yaml_round_trip(tmp_path):
    config = (valid().training(lr=0.02).evaluation(evaluation_interval=3)
              .environment(observation_space=gym.spaces.Box(-1, 1, (4,)),
                           action_space=gym.spaces.Discrete(2))
              .rl_module(model_config={"fcnet_hiddens": [32]}).debugging(seed=1))
    config.to_yaml(tmp_path / "c.yaml")
    loaded = AlgorithmConfig.from_yaml(tmp_path / "c.yaml")
    assert isinstance(loaded, BCConfig)
    assert loaded.to_dict() == config.to_dict()
    assert loaded.observation_space == config.observation_space


def test_checkpointing_round_trips_and_defaults_to_the_final_checkpoint_only(tmp_path):
    assert valid().to_dict()["checkpointing"] == {"checkpoint_frequency": 0,
                                                  "keep_checkpoints_num": None}
    config = valid().checkpointing(checkpoint_frequency=5, keep_checkpoints_num=2)
    config.to_yaml(tmp_path / "c.yaml")
    assert "checkpointing:\n  checkpoint_frequency: 5\n  keep_checkpoints_num: 2\n" in (
        tmp_path / "c.yaml").read_text()
    loaded = AlgorithmConfig.from_yaml(tmp_path / "c.yaml")
    assert (loaded.checkpoint_frequency, loaded.keep_checkpoints_num) == (5, 2)
    assert loaded.to_dict() == config.to_dict()
    loaded.validate()


@pytest.mark.parametrize("options, message", [
    ({"checkpoint_frequency": -1}, r"\n  checkpoint_frequency: must be an int >= 0 \(iterations "
                                   r"between checkpoints; 0: only the final one\), got -1$"),
    ({"checkpoint_frequency": 2.5}, r"\n  checkpoint_frequency: must be an int >= 0 .*, got 2.5$"),
    ({"keep_checkpoints_num": 0},
     r"\n  keep_checkpoints_num: must be None \(keep all\) or an int >= 1, got 0$"),
    ({"keep_checkpoints_num": "3"}, r"\n  keep_checkpoints_num: must be .*, got '3'$"),
])
def test_checkpointing_options_are_checked(options, message):
    with pytest.raises(ConfigError, match=message):
        valid().checkpointing(**options).validate()


def test_periodic_checkpoints_refuse_what_the_config_refuses(tmp_path):
    with pytest.raises(ConfigError, match=r"^keep_checkpoints_num: must be None \(keep all\) or "
                                          r"an int >= 1, got 0$"):
        PeriodicCheckpoints(tmp_path, frequency=1, keep=0)


def test_from_dict_names_unknown_sections_and_keys():
    with pytest.raises(ConfigError,
                       match=r"unknown key\(s\) \['lerning_rate'\] in section 'training'"):
        AlgorithmConfig.from_dict({"algorithm": "BC", "training": {"lerning_rate": 1}})
    with pytest.raises(ConfigError, match="unknown config section 'trainig'"):
        AlgorithmConfig.from_dict({"algorithm": "BC", "trainig": {}})
    with pytest.raises(ConfigError, match="unknown algorithm 'PPO'"):
        AlgorithmConfig.from_dict({"algorithm": "PPO"})


def test_yaml_refuses_python_callables(tmp_path):
    config = valid().environment(env=lambda env_config: gym.make("CartPole-v1"))
    with pytest.raises(ConfigError, match="cannot be written to YAML"):
        config.to_yaml(tmp_path / "c.yaml")


class Tag(ConnectorV2):
    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        return batch


def test_learner_connector_pieces_come_before_the_defaults():
    config = valid().training(learner_connector=lambda obs_space, act_space: [Tag(), Tag()])
    names = [piece.name for piece in config.build_learner_connector(None, None)]
    assert names[:2] == ["Tag", "Tag"] and names[-1] == "BatchIndividualItems"
    bare = valid().training(learner_connector=lambda o, a: Tag(),
                            add_default_connectors_to_learner_pipeline=False)
    assert [p.name for p in bare.build_learner_connector(None, None)] == ["Tag"]
    assert BatchIndividualItems not in {type(p) for p in bare.build_learner_connector(None, None)}


@pytest.mark.parametrize("path", sorted(Path(__file__).parent.parent.glob("configs/*.yaml")),
                         ids=lambda path: path.name)
def test_every_shipped_config_loads_as_its_algorithm_and_validates(path):
    config = AlgorithmConfig.from_yaml(path)
    assert path.name.startswith(config.algo_name.lower() + "_")
    config.validate()
