"""RLlib's documented extension points, each tested with a port of the seed's own example
(tests/extensions.py): a static ``_map_to_episodes`` with ``prelearner_kwargs``, a ``__call__``
with its own pipeline, an ``OfflineData`` subclass, a custom episode buffer, and learner
connector pieces added with ``learner_connector=`` or a ``build_learner_connector`` override."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest
import ray.data
import torch
from PIL import Image

from connectors import AddObservationsFromEpisodesToBatch, BatchIndividualItems
from offline_rl import (
    BC,
    AlgorithmConfig,
    BCCatalog,
    BCConfig,
    DefaultBCTorchRLModule,
    DefaultModelConfig,
    MultiAgentBatch,
    MultiRLModuleSpec,
    OfflineData,
    OfflinePreLearner,
    RLModuleSpec,
    override,
)
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.data.prelearner.prelearner import map_in_process
from offline_rl.episodes.replay_buffer import EpisodeBuffer
from offline_rl.errors import ConfigError, UnknownModuleError
from offline_rl.models.value_module import PolicyValueTorchRLModule
from tests.extensions import (
    CountEpisodeSteps,
    ImageOfflineData,
    ImageOfflinePreLearner,
    ScaleRewards,
    TextEpisodesPreLearner,
    TextOfflinePreLearner,
    TwoModules,
    WholeEpisodeBuffer,
)
from tests.test_episode_formats import SPACES as EPISODE_SPACES
from tests.test_episode_formats import episodes_table, make_episode

SENTENCES = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog sat"]
SPACES = (gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))


@pytest.fixture()
def text_data(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES * 20) + "\n")
    tokens = sorted({token for sentence in SENTENCES for token in sentence.split(" ")})
    vocabulary = {token: index for index, token in enumerate(tokens, start=1)}
    return path, vocabulary


def text_config(path, vocabulary, prelearner_class, observation_space):
    # The seed's token ids start at 1, so the actions span len(vocabulary) + 1 values.
    return (BCConfig()
            .environment(observation_space=observation_space,
                         action_space=gym.spaces.Discrete(len(vocabulary) + 1))
            .training(lr=1e-2, train_batch_size_per_learner=32)
            .offline_data(input_=str(path), input_read_method="read_text",
                          prelearner_class=prelearner_class,
                          prelearner_kwargs={"vocabulary": vocabulary},
                          dataset_num_iters_per_learner=10)
            .rl_module(model_config={"fcnet_hiddens": [32]})
            .debugging(seed=0))


def test_a_static_map_to_episodes_with_prelearner_kwargs_trains(ray_session, text_data):
    path, vocabulary = text_data
    one_hot = gym.spaces.Box(0.0, 1.0, (len(vocabulary), 1, 1), np.float32)
    config = text_config(path, vocabulary, TextEpisodesPreLearner, one_hot)
    with config.build() as algo:
        losses = [algo.train()["learners"]["default_policy"]["policy_loss"] for _ in range(4)]
    assert losses[-1] < losses[0] * 0.7
    episodes = TextOfflinePreLearner._map_to_episodes(  # callable on the class, as in the seed
        False, {"text": np.array(SENTENCES[:1])}, vocabulary=vocabulary, to_numpy=True)
    assert [len(episode) for episode in episodes["episodes"]] == [5]
    with pytest.raises(ValueError, match="No `vocabulary`"):
        TextOfflinePreLearner._map_to_episodes(False, {"text": np.array(SENTENCES[:1])})


def seed_module_spec(vocabulary):
    """The seed's ``module_spec``, as it writes it."""
    return MultiRLModuleSpec(
        rl_module_specs={
            "default_policy": RLModuleSpec(
                model_config=DefaultModelConfig(
                    conv_filters=[[16, 4, 2], [32, 4, 2], [64, 4, 2], [128, 4, 2]],
                    conv_activation="relu",
                ),
                inference_only=False,
                module_class=DefaultBCTorchRLModule,
                catalog_class=BCCatalog,
                action_space=gym.spaces.Discrete(len(vocabulary)),
                observation_space=gym.spaces.Box(0.0, 1.0, (len(vocabulary), 1, 1), np.float32),
            ),
        },
    )


def test_the_seed_call_override_maps_a_batch_to_a_multi_agent_batch(ray_session, text_data):
    path, vocabulary = text_data
    ds = ray.data.read_text(str(path))
    module_spec = seed_module_spec(vocabulary)
    batch = ds.take_batch(10)
    oplr = TextOfflinePreLearner(
        config=AlgorithmConfig(),
        spaces=(
            gym.spaces.Discrete(len(vocabulary)),
            gym.spaces.Box(0.0, 1.0, (len(vocabulary), 1, 1), np.float32)),
        module_spec=module_spec,
        vocabulary=vocabulary,
    )
    transformed = oplr(batch)
    assert list(transformed) == ["batch"] and isinstance(transformed["batch"], MultiAgentBatch)
    policy_batches = transformed["batch"].policy_batches
    assert list(policy_batches) == ["default_policy"]
    columns = policy_batches["default_policy"]
    steps = sum(len(text.split(" ")) - 1 for text in batch["text"])
    assert transformed["batch"].env_steps() == columns.count == steps
    assert isinstance(columns["obs"], torch.Tensor)
    assert columns["obs"].shape == (steps, len(vocabulary), 1, 4)  # four frames stacked
    assert columns["actions"].shape == columns["rewards"].shape == (steps,)
    obs = columns["obs"].numpy()
    np.testing.assert_array_equal(obs[1, :, :, :3], obs[0, :, :, 1:])
    # The spec's conv layers build: "same" padding keeps the (V, 1) frame's width of 1.
    module = module_spec.build()["default_policy"]
    assert isinstance(module, DefaultBCTorchRLModule) and module.conv is not None
    assert module.compute_actions(np.zeros((2, len(vocabulary), 1, 1), np.float32)).shape == (2,)


@pytest.mark.slow
def test_the_seed_call_override_trains_through_the_config(ray_session, text_data, tmp_path):
    path, vocabulary = text_data
    # The seed's __call__ reads spaces[0] as the action space (RLlib hands PreLearners
    # (observation_space, action_space)); episodes keep the spaces they are given.
    one_hot = gym.spaces.Box(0.0, 1.0, (len(vocabulary), 1, 1), np.float32)
    stacked = gym.spaces.Box(0.0, 1.0, (len(vocabulary), 1, 4), np.float32)
    config = text_config(path, vocabulary, TextOfflinePreLearner, one_hot).rl_module(
        rl_module_spec=RLModuleSpec(
            module_class=DefaultBCTorchRLModule, catalog_class=BCCatalog,
            observation_space=stacked,
            model_config=DefaultModelConfig(conv_filters=[[8, 4, 2], [16, 4, 2]],
                                            fcnet_hiddens=[32])))
    with config.build() as algo:
        losses = [algo.train()["learners"]["default_policy"]["policy_loss"] for _ in range(3)]
        assert all(np.isfinite(losses)) and losses[-1] < losses[0]
        module = algo.get_module()
        assert module is algo.get_module(module_id="default_policy") is algo.module
        assert isinstance(module, DefaultBCTorchRLModule) and module.conv is not None
        with pytest.raises(UnknownModuleError, match=r"no module 'other'; the modules are "
                                                     r"\['default_policy'\]"):
            algo.get_module("other")
        with pytest.warns(UserWarning, match="has no config.yaml"):  # a spec of classes
            algo.save_to_path(tmp_path / "checkpoint")
    with BC.from_checkpoint(tmp_path / "checkpoint", config=config) as restored:
        assert restored.get_module().conv is not None


def test_a_call_override_returning_several_modules_is_refused(ray_session, text_data):
    path, vocabulary = text_data
    one_hot = gym.spaces.Box(0.0, 1.0, (len(vocabulary), 1, 1), np.float32)
    config = text_config(path, vocabulary, TwoModules, one_hot)
    prelearner = TwoModules(config=config, spaces=(config.action_space, one_hot),
                            module_spec=seed_module_spec(vocabulary), vocabulary=vocabulary)
    several = r"MultiAgentBatch for the modules \['default_policy', 'other'\]; .*multi-agent " \
              r"training is not supported yet"
    with pytest.raises(ConfigError, match=several):
        map_in_process(prelearner, pa.table({"text": SENTENCES}))
    with pytest.raises(ConfigError, match=r"for the modules \['other'\]; offline-rl trains "
                                          r"the one module 'default_policy'"):
        train_columns({"batch": MultiAgentBatch({"other": {"obs": np.zeros(1)}}, env_steps=1)})
    with config.build() as algo, pytest.raises(ConfigError, match=several):
        algo.train()


def test_module_specs_refuse_what_offline_rl_modules_do_not_build():
    spaces = {"observation_space": gym.spaces.Box(0, 1, (6, 1, 1), np.float32),
              "action_space": gym.spaces.Discrete(3)}
    with pytest.raises(ConfigError, match="catalog_class=BCCatalog: .*DefaultTorchRLModule's "
                                          "catalog is None"):
        RLModuleSpec(catalog_class=BCCatalog, **spaces).build()
    with pytest.raises(ConfigError, match="inference_only=True"):
        RLModuleSpec(module_class=DefaultBCTorchRLModule, inference_only=True, **spaces).build()
    with pytest.raises(ConfigError, match="conv_filters: PolicyValueTorchRLModule reads flat "
                                          "observations"):
        RLModuleSpec(module_class=PolicyValueTorchRLModule,
                     model_config={"conv_filters": [[4, 2, 2]]}, **spaces).build()
    with pytest.raises(ConfigError, match=r"conv_filters=\[\[4, 2\]\]: give a list of "
                                          r"\[out_channels, kernel, stride\]"):
        DefaultModelConfig.from_dict({"conv_filters": [[4, 2]]})
    with pytest.raises(ConfigError, match=r"need \(height, width, channels\) observations; "
                                          r"the observation shape is \(6,\)"):
        RLModuleSpec(module_class=DefaultBCTorchRLModule,
                     model_config={"conv_filters": [[4, 2, 2]]},
                     observation_space=gym.spaces.Box(0, 1, (6,)),
                     action_space=gym.spaces.Discrete(3)).build()


def test_override_refuses_a_method_the_parent_lacks():
    with pytest.raises(TypeError, match="_map_to_episode is not a method of OfflinePreLearner"):
        class Misspelt(OfflinePreLearner):
            @override(OfflinePreLearner)
            def _map_to_episode(self):
                return {}


def test_an_offline_data_subclass_reads_its_own_files_and_serves_the_learner(ray_session,
                                                                           tmp_path):
    rng = np.random.default_rng(0)
    for index in range(64):
        image = np.full((8, 8, 3), rng.choice([30, 220]), dtype=np.uint8)
        Image.fromarray(image).save(tmp_path / f"image_{index:02d}.png")
    config = (BCConfig()
              .environment(observation_space=gym.spaces.Box(0.0, 1.0, (8, 8, 3), np.float32),
                           action_space=gym.spaces.Discrete(2))
              .training(lr=3e-2, train_batch_size_per_learner=32)
              .offline_data(input_=str(tmp_path), input_read_method="read_binary_files",
                            offline_data_class=ImageOfflineData,
                            prelearner_class=ImageOfflinePreLearner,
                            dataset_num_iters_per_learner=5)
              .rl_module(model_config={"fcnet_hiddens": [16], "fcnet_activation": "relu"})
              .debugging(seed=0))
    with config.build() as algo:
        assert isinstance(algo.offline_data, ImageOfflineData)
        for _ in range(6):
            result = algo.train()
        assert algo.offline_data.batches_sampled == 30
        bright = np.full((2, 8, 8, 3), 220 / 255, np.float32)
        dark = np.full((2, 8, 8, 3), 30 / 255, np.float32)
        assert algo.module.compute_actions(bright).tolist() == [1, 1]
        assert algo.module.compute_actions(dark).tolist() == [0, 0]
    assert result["learners"]["default_policy"]["num_module_steps_trained"] == 5 * 32


def test_an_overridden_sample_must_run_a_set_number_of_updates(ray_session, tmp_path):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "image.png")
    config = (BCConfig()
              .environment(observation_space=gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                           action_space=gym.spaces.Discrete(2))
              .offline_data(input_=str(tmp_path), input_read_method="read_binary_files",
                            offline_data_class=ImageOfflineData,
                            prelearner_class=ImageOfflinePreLearner))
    with pytest.raises(ConfigError, match="ImageOfflineData overrides sample\\(\\), which cannot "
                                         "say where an epoch ends.*dataset_num_iters_per_learner"):
        config.build()


def test_a_custom_buffer_written_to_the_documented_interface_is_used(tmp_path):
    config = (BCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=64)
              .offline_data(input_=str(tmp_path), input_read_episodes=True,
                            prelearner_buffer_class="tests.extensions:WholeEpisodeBuffer"))
    prelearner = OfflinePreLearner(config, EPISODE_SPACES)
    assert isinstance(prelearner.episode_buffer, WholeEpisodeBuffer)
    assert isinstance(prelearner.episode_buffer, EpisodeBuffer)
    episodes = [make_episode(f"e{i}", steps) for i, steps in enumerate([30, 50, 70])]
    batch = train_columns(prelearner(episodes_table(episodes)))
    assert len(batch["obs"]) % 64 == 0 and len(batch["obs"]) >= 64
    assert prelearner.episode_buffer.get_num_timesteps() == 150


def test_batch_pieces_run_after_the_episode_stage_on_either_path(cartpole_data):
    """A piece that declares ``needs_episodes = False`` runs on the flat batch, after the
    default pieces, so the column fast path stays on; one that declares nothing gets the
    episodes (the safe default for pieces written for RLlib), which turns the path off."""
    rows = pa.table({"obs": [[0.0, 0.1, 0.2, 0.3]] * 3, "new_obs": [[0.1, 0.2, 0.3, 0.4]] * 3,
                     "actions": [0, 1, 0], "rewards": [1.0, 2.0, 3.0],
                     "terminateds": [False, False, True], "eps_id": ["a"] * 3, "t": [0, 1, 2]})
    config = BCConfig().environment("CartPole-v1").offline_data(input_=str(cartpole_data))
    fast = OfflinePreLearner(config.copy().training(
        learner_connector=lambda obs_space, act_space: ScaleRewards(factor=0.5)), SPACES)(rows)
    episodic = OfflinePreLearner(config.copy().training(
        learner_connector=lambda obs_space, act_space: [ScaleRewards(factor=0.5),
                                                        CountEpisodeSteps()]), SPACES)(rows)
    fast, episodic = train_columns(fast), train_columns(episodic)
    for batch in (fast, episodic):
        assert batch["rewards"].tolist() == [0.5, 1.0, 1.5]
        assert batch["scaled_flat_batch"].all()  # it was given the built batch, no episodes
    assert episodic["episode_steps"].tolist() == [1, 1, 1]  # tabular rows: one-step episodes
    for name in ("obs", "new_obs", "actions", "terminateds", "truncateds"):
        np.testing.assert_array_equal(episodic[name], fast[name])


class PipelineEditingBCConfig(BCConfig):
    """Edits the default pipeline as RLlib's MARWIL does: ``prepend``, ``insert_after`` and
    ``append``."""

    def build_learner_connector(self, input_observation_space, input_action_space,
                                device=None):
        pipeline = super().build_learner_connector(input_observation_space, input_action_space,
                                                   device=device)
        pipeline.prepend(ScaleRewards(factor=2.0))
        pipeline.insert_after(AddObservationsFromEpisodesToBatch, CountEpisodeSteps())
        pipeline.append(ScaleRewards(factor=0.25))
        return pipeline


@pytest.mark.slow
def test_a_build_learner_connector_override_reaches_the_prelearner_actors(ray_session,
                                                                         cartpole_data):
    config = (PipelineEditingBCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=256)
              .offline_data(input_=str(cartpole_data)))
    pipeline = config.build_learner_connector(*SPACES)
    assert [piece.name for piece in pipeline][:3] == [
        "ScaleRewards", "AddObservationsFromEpisodesToBatch", "CountEpisodeSteps"]
    assert pipeline.connectors[-2].name == BatchIndividualItems.__name__
    data = OfflineData(config.data_config(SPACES), SPACES).start()
    try:
        batch = data.sample()
    finally:
        data.stop()
    assert set(batch["rewards"].tolist()) == {0.5}  # CartPole's 1.0, x2 then x0.25
    assert batch["episode_steps"].tolist() == [1] * 256
