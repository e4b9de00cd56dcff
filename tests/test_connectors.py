"""Connector pieces and pipeline editing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from connectors import (
    AddColumnsFromEpisodesToTrainBatch,
    AddNextObservationsFromEpisodesToTrainBatch,
    AddObservationsFromEpisodesToBatch,
    AgentToModuleMapping,
    BatchIndividualItems,
    ConnectorPipelineV2,
    ConnectorV2,
    LearnerConnectorPipeline,
    NumpyToTensor,
    default_learner_pipeline,
)
from offline_rl import SingleAgentEpisode
from offline_rl.errors import ConfigError


def make_episode(steps: int, start: float = 0.0, terminated: bool = True) -> SingleAgentEpisode:
    obs = np.arange(steps + 1, dtype=np.float32)[:, None].repeat(2, axis=1) + start
    return SingleAgentEpisode(
        observations=list(obs),
        actions=list(np.arange(steps) % 2),
        rewards=list(np.arange(steps, dtype=np.float32)),
        extra_model_outputs={"action_logp": list(-np.ones(steps, dtype=np.float32))},
        terminated=terminated,
        len_lookback_buffer=0,
    ).to_numpy()


class Marker(ConnectorV2):
    def __init__(self, tag: str):
        super().__init__()
        self.tag = tag

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        batch.setdefault("trace", []).append(self.tag)
        return batch


def test_default_pipeline_turns_episodes_into_aligned_columns():
    episodes = [make_episode(3), make_episode(2, start=10.0, terminated=False)]
    batch = default_learner_pipeline()(rl_module=None, batch={}, episodes=episodes)
    assert sorted(batch) == ["action_logp", "actions", "new_obs", "obs", "rewards",
                             "terminateds", "truncateds"]
    assert all(len(column) == 5 for column in batch.values())
    np.testing.assert_array_equal(batch["obs"][:, 0], [0, 1, 2, 10, 11])
    np.testing.assert_array_equal(batch["new_obs"][:, 0], [1, 2, 3, 11, 12])
    np.testing.assert_array_equal(batch["terminateds"], [False, False, True, False, False])
    assert not batch["truncateds"].any()


def test_pieces_keep_columns_already_in_the_batch():
    given = {"obs": np.full((3, 2), 7.0), "actions": np.array([5, 5, 5])}
    batch = default_learner_pipeline()(rl_module=None, batch=dict(given),
                                       episodes=[make_episode(3)])
    np.testing.assert_array_equal(batch["obs"], given["obs"])
    np.testing.assert_array_equal(batch["actions"], given["actions"])
    np.testing.assert_array_equal(batch["rewards"], [0, 1, 2])


def test_acting_mode_adds_the_latest_observation_per_episode():
    piece = AddObservationsFromEpisodesToBatch()
    batch = piece(rl_module=None, batch={}, episodes=[make_episode(3), make_episode(1, 10.0)])
    batch = BatchIndividualItems()(rl_module=None, batch=batch, episodes=[])
    np.testing.assert_array_equal(batch["obs"][:, 0], [3, 11])


def test_pipeline_insert_and_remove_by_name_and_class():
    pipeline = ConnectorPipelineV2(connectors=[Marker("a"), BatchIndividualItems()])
    pipeline.insert_after("Marker", Marker("b"))
    pipeline.insert_before(BatchIndividualItems, Marker("c"))
    pipeline.prepend(Marker("first"))
    pipeline.append(Marker("last"))
    assert [getattr(c, "tag", c.name) for c in pipeline] == [
        "first", "a", "b", "c", "BatchIndividualItems", "last"]
    removed = pipeline.remove(BatchIndividualItems)
    assert isinstance(removed, BatchIndividualItems)
    assert pipeline(rl_module=None, batch={}, episodes=[])["trace"] == [
        "first", "a", "b", "c", "last"]


def test_pipeline_names_the_missing_anchor():
    pipeline = ConnectorPipelineV2(connectors=[BatchIndividualItems()])
    with pytest.raises(ValueError, match="NumpyToTensor.*BatchIndividualItems"):
        pipeline.insert_before("NumpyToTensor", Marker("x"))
    with pytest.raises(ValueError, match="AddColumnsFromEpisodesToTrainBatch"):
        pipeline.remove(AddColumnsFromEpisodesToTrainBatch)


def test_pipeline_rejects_a_piece_that_returns_no_batch():
    class Broken(ConnectorV2):
        def __call__(self, *, rl_module, batch, episodes, **kwargs):
            return None

    with pytest.raises(TypeError, match="Broken returned NoneType"):
        ConnectorPipelineV2(connectors=[Broken()])(rl_module=None, batch={}, episodes=[])


def test_pipeline_state_round_trip_checks_its_pieces():
    pipeline = default_learner_pipeline()
    pipeline.set_state(pipeline.get_state())
    with pytest.raises(ValueError, match="pipeline state"):
        pipeline.set_state({"000_Other": {}})


def test_next_observation_piece_alone():
    batch = AddNextObservationsFromEpisodesToTrainBatch()(
        rl_module=None, batch={}, episodes=[make_episode(2)])
    np.testing.assert_array_equal(np.concatenate(batch["new_obs"])[:, 0], [1, 2])


def test_numpy_to_tensor_keeps_dtypes_and_skips_non_numeric():
    batch = {"obs": np.ones((2, 3), np.float32), "actions": np.array([1, 0]),
             "eps_id": np.array(["a", "b"])}
    out = NumpyToTensor(device="cpu")(rl_module=None, batch=batch, episodes=[])
    assert out["obs"].dtype == torch.float32 and out["actions"].dtype == torch.int64
    assert out["eps_id"] is batch["eps_id"]


def test_default_pipeline_carries_spaces():
    space = gym.spaces.Box(-1, 1, (2,))
    pipeline = default_learner_pipeline(space, gym.spaces.Discrete(2))
    assert all(piece.input_observation_space is space for piece in pipeline)


def test_a_multi_rl_module_gets_its_batch_keyed_by_module_id():
    from offline_rl import MultiRLModule

    module = MultiRLModule({"default_policy": None})
    episode = SingleAgentEpisode(observations=[[0.0], [1.0]], actions=[1], rewards=[1.0],
                                 terminated=True, len_lookback_buffer=0).to_numpy()
    pipeline = LearnerConnectorPipeline(connectors=[
        AddObservationsFromEpisodesToBatch(as_learner_connector=True),
        AgentToModuleMapping(), BatchIndividualItems(multi_agent=False), NumpyToTensor()])
    batch = pipeline(rl_module=module, batch={}, episodes=[episode])
    assert list(batch) == ["default_policy"]
    assert isinstance(batch["default_policy"]["obs"], torch.Tensor)
    # offline-rl's learners take flat columns: with a plain module the batch stays flat.
    flat = pipeline(rl_module=object(), batch={}, episodes=[episode])
    assert list(flat) == ["obs"]
    with pytest.raises(ConfigError, match=r"the MultiRLModule has \['a', 'b'\]; multi-agent "
                                          "training is not supported yet"):
        AgentToModuleMapping()(rl_module=MultiRLModule({"a": None, "b": None}),
                               batch={"obs": np.zeros(1)}, episodes=[])
    with pytest.raises(ConfigError, match="multi_agent=True"):
        BatchIndividualItems(multi_agent=True)
