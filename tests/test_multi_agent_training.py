"""Multi-agent training (issue 39) from tabular rows that name their agents, multi-agent
episodes and old-stack MultiAgentBatch lines: each module of ``config.multi_agent(...)`` trains
on the data of the agents mapped to it, and evaluation plays all of them together in
``MultiAgentCartPole``.

``expert`` is what ``offline-rl datasets make MultiAgentCartPole expert`` records. In
``flipped``, the CartPole expert dataset's episodes are given alternately to ``agent_0`` and
``agent_1``, with ``agent_1``'s actions inverted, so a module that trained on its rows falls at
once (return about 10) while ``agent_0``'s module balances: a module that read another agent's
rows would show it.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import msgpack
import msgpack_numpy
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from matplotlib.figure import Figure
from pettingzoo import ParallelEnv

from offline_rl import Algorithm, BCConfig
from offline_rl.algorithms.checkpoint import load_module
from offline_rl.algorithms.multi_agent_algorithm import MultiAgentAlgorithm
from offline_rl.codec import unpack_episode_state
from offline_rl.datasets.experts import behaviour_policy
from offline_rl.episodes.multi_agent_episode import MultiAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.evaluation.multi_agent_cartpole import MultiAgentCartPole
from offline_rl.evaluation.multi_agent_env import make_multi_agent_env
from offline_rl.evaluation.multi_agent_rollout import multi_agent_rollout
from offline_rl.monitoring.learning_curves import panels
from offline_rl.monitoring.result_log import flatten, read_results
from offline_rl.recording.writer import EpisodeWriter

AGENTS = ("agent_0", "agent_1")


def multi_agent_rows(single_agent: Path, folder: Path, *, flip: str | None = None) -> Path:
    """``single_agent``'s episodes given alternately to the ``AGENTS`` (``flip``: that agent's
    actions inverted), one Parquet file per agent."""
    table = pq.read_table(sorted(glob.glob(f"{single_agent}/**/*.parquet", recursive=True)))
    episodes = pc.unique(table.column("eps_id")).to_pylist()
    owner = {episode: AGENTS[number % 2] for number, episode in enumerate(episodes)}
    agents = pa.array([owner[episode] for episode in table.column("eps_id").to_pylist()])
    table = table.set_column(table.schema.get_field_index("agent_id"), "agent_id", agents)
    folder.mkdir(parents=True)
    for agent in AGENTS:
        rows = table.filter(pc.equal(table.column("agent_id"), agent))
        if agent == flip:
            flipped = pc.subtract(1, rows.column("actions"))
            rows = rows.set_column(rows.schema.get_field_index("actions"), "actions", flipped)
        pq.write_table(rows, folder / f"{agent}.parquet")
    return folder


@pytest.fixture(scope="module")
def flipped(cartpole_data, tmp_path_factory) -> Path:
    return multi_agent_rows(cartpole_data, tmp_path_factory.mktemp("ma") / "flipped",
                            flip="agent_1")


def config(data: Path, **multi_agent) -> BCConfig:
    return (BCConfig()
            .environment("MultiAgentCartPole")
            .training(lr=3e-3, train_batch_size_per_learner=512)
            .offline_data(input_=str(data), dataset_num_iters_per_learner=40)
            .rl_module(model_config={"fcnet_hiddens": [64, 64]})
            .evaluation(evaluation_interval=None, evaluation_duration=4)
            .multi_agent(**multi_agent)
            .debugging(seed=0))


def module_losses(result: dict) -> dict[str, dict[str, float]]:
    return {module: {key: value for key, value in learner.items() if key.endswith("_loss")}
            for module, learner in result["learners"].items() if module != "__all_modules__"}


@pytest.mark.slow
def test_each_module_learns_from_its_own_agents_rows_and_resumes_exactly(ray_session, flipped,
                                                                         tmp_path):
    """A checkpoint holds every module's weights, optimizer and stream position: restored
    midway, the run continues with the same losses and ends with the same modules."""
    separate = config(flipped, policies=["left", "right"],
                      policy_mapping_fn=lambda agent_id, episode, **kwargs:
                      "left" if agent_id == "agent_0" else "right")
    with separate.build() as algo:
        assert isinstance(algo, MultiAgentAlgorithm)
        algo.train()
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        results = [algo.train() for _ in range(3)]
        evaluation = algo.evaluate()["env_runners"]
        greedy = {module: algo.get_module(module).compute_actions(np.zeros((1, 4), np.float32))
                  for module in ("left", "right")}
    learners = results[-1]["learners"]
    assert set(learners) == {"left", "right", "__all_modules__"}
    trained = learners["__all_modules__"]["num_module_steps_trained"]
    assert trained == {"left": 40 * 512, "right": 40 * 512}
    for module, agent in (("left", "agent_0"), ("right", "agent_1")):
        assert results[-1]["data"][module]["rows_per_epoch"] == pq.read_metadata(
            flipped / f"{agent}.parquet").num_rows
    returns = evaluation["agent_episode_returns_mean"]
    assert returns["agent_0"] >= 400 and returns["agent_1"] <= 30, returns
    assert evaluation["module_episode_returns_mean"] == {"left": returns["agent_0"],
                                                         "right": returns["agent_1"]}
    assert sorted(p.name for p in Path(checkpoint).iterdir()) == [
        "algorithm_state.json", "config.yaml", "left", "right"]
    with pytest.raises(ConfigError, match=r"is a multi-agent checkpoint, a checkpoint folder "
                                          r"per module \(\['left', 'right'\]\)"):
        load_module(checkpoint)
    with Algorithm.from_checkpoint(checkpoint) as restored:
        assert isinstance(restored, MultiAgentAlgorithm) and restored.iteration == 1
        assert restored.mapping == {"agent_0": "left", "agent_1": "right"}
        assert [module_losses(restored.train()) for _ in range(3)] == list(map(module_losses,
                                                                              results))
        for module, actions in greedy.items():
            np.testing.assert_array_equal(
                restored.get_module(module).compute_actions(np.zeros((1, 4), np.float32)),
                actions)
        restored.save_to_path(tmp_path / "end")
    np.testing.assert_array_equal(load_module(tmp_path / "end" / "left").compute_actions(
        np.zeros((1, 4), np.float32)), greedy["left"])


@pytest.mark.slow
def test_every_module_trains_with_two_learners_and_checkpoints_them(ray_session, flipped,
                                                                    tmp_path):
    """Each module's pipeline is split between its own two learner actors; a checkpoint
    restores each module's weights, and training goes on from it."""
    two_learners = config(flipped, policies=["left", "right"],
                          policy_mapping_fn={"agent_0": "left", "agent_1": "right"}).learners(
        num_learners=2).offline_data(dataset_num_iters_per_learner=5)
    observations = np.linspace(-0.2, 0.2, 32, dtype=np.float32).reshape(8, 4)
    with two_learners.build() as algo:
        first = algo.train()
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        greedy = {module: algo.get_module(module).compute_actions(observations)
                  for module in ("left", "right")}
    assert first["learners"]["__all_modules__"]["num_module_steps_trained"] == {
        "left": 2 * 5 * 512, "right": 2 * 5 * 512}
    assert [len(first["data"][module]["per_learner"]) for module in ("left", "right")] == [2, 2]
    with Algorithm.from_checkpoint(checkpoint) as restored:
        for module, actions in greedy.items():
            np.testing.assert_array_equal(
                restored.get_module(module).compute_actions(observations), actions)
        losses = module_losses(restored.train())
    assert all(np.isfinite(losses[module]["total_loss"]) for module in ("left", "right"))


@pytest.fixture(scope="module")
def expert(tmp_path_factory) -> Path:
    """``offline-rl datasets make MultiAgentCartPole expert``: 20 episodes of two agents each
    playing the CartPole expert, as rows naming their agent."""
    from offline_rl.datasets import make_dataset

    data = tmp_path_factory.mktemp("ma") / "expert"
    card = make_dataset("MultiAgentCartPole", data, tier="expert", episodes=20, seed=0,
                        progress=False)
    assert min(card["agent_episode_returns_mean"].values()) >= 475, card
    return data


@pytest.mark.parametrize("env", ["MultiAgentCartPole", "AlternatingCartPole"])
def test_a_shared_module_trains_on_every_agents_rows(ray_session, expert, env):
    """In ``AlternatingCartPole`` the two agents take turns on one cart: the module trained on
    both agents' rows balances it for both."""
    shared = config(expert, policies=["shared"]).environment(env).evaluation(
        evaluation_interval=4)
    with shared.build() as algo:
        assert algo.mapping == {"agent_0": "shared", "agent_1": "shared"}
        results = [algo.train() for _ in range(4)]  # an epoch ends within 80 updates of 512
    assert results[-1]["learners"]["__all_modules__"]["num_module_steps_trained"] == {
        "shared": 40 * 512}
    rows = pq.read_table(sorted(glob.glob(f"{expert}/**/*.parquet", recursive=True)))
    assert results[-1]["data"]["shared"]["rows_per_epoch"] == rows.num_rows
    assert "evaluation" not in results[2]
    evaluation = results[-1]["evaluation"]["env_runners"]
    returns = evaluation["agent_episode_returns_mean"]
    assert min(returns.values()) >= (400 if env == "MultiAgentCartPole" else 200), returns
    assert evaluation["module_episode_returns_mean"] == {"shared": sum(returns.values())}


def test_an_agent_mapped_to_an_unknown_module_is_named(flipped):
    bad = config(flipped, policies=["left", "right"],
                 policy_mapping_fn={"agent_0": "left", "agent_1": "right"})
    bad.multi_agent(policy_mapping_fn=lambda agent_id, episode, **kwargs: "up")
    with pytest.raises(ConfigError, match=r"policy_mapping_fn maps the agent 'agent_0' to the "
                                          r"module 'up', which policies does not name"):
        bad.build()


def test_a_dict_mapping_must_name_every_agent_of_the_data(flipped):
    partial = config(flipped, policies=["left"], policy_mapping_fn={"agent_0": "left"})
    partial.environment(env=None, observation_space=MultiAgentCartPole().observation_spaces[
        "agent_0"], action_space=MultiAgentCartPole().action_spaces["agent_0"])
    with pytest.raises(ConfigError, match=r"policy_mapping_fn maps no module to the agent "
                                          r"'agent_1'"):
        partial.build()


def test_a_trained_module_without_rows_is_named(flipped):
    unused = config(flipped, policies=["left", "right", "idle"],
                    policy_mapping_fn={"agent_0": "left", "agent_1": "right"})
    with pytest.raises(ConfigError, match=r"the modules \['idle'\] are to be trained, but no "
                                          r"row of the input is theirs"):
        unused.build()


def test_rows_without_agents_are_refused_naming_the_file(cartpole_data):
    with pytest.raises(DataFormatError, match=r"row 0: column 'agent_id' is empty; every row "
                                              r"of multi-agent data names its agent"):
        config(cartpole_data, policies=["shared"]).build()


@pytest.fixture(scope="module")
def expert_episodes(tmp_path_factory) -> Path:
    """The ``expert`` episodes (the same seed) as ``MultiAgentEpisode`` states:
    ``offline-rl datasets make MultiAgentCartPole expert --episodes-format``."""
    from offline_rl.datasets import make_dataset

    data = tmp_path_factory.mktemp("ma") / "expert-episodes"
    make_dataset("MultiAgentCartPole", data, tier="expert", episodes=20, seed=0,
                 write_episodes=True, progress=False)
    return data


@pytest.mark.slow
def test_multi_agent_episodes_train_each_module_on_its_agents_episodes(ray_session, expert,
                                                                       expert_episodes):
    """Each module's PreLearners keep the episodes of its agents out of each multi-agent
    episode: an epoch of its stream is its agent's rows of the same data written as rows, in
    whole batches of 512 (both agents' would be twice as many)."""
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode as RLlibEpisode

    separate = config(expert_episodes, policies=["left", "right"],
                      policy_mapping_fn={"agent_0": "left", "agent_1": "right"}).offline_data(
        input_read_episodes=True, dataset_num_iters_per_learner=20)
    with separate.build() as algo:
        result = [algo.train() for _ in range(4)][-1]
        returns = algo.evaluate()["env_runners"]["agent_episode_returns_mean"]
    rows = pq.read_table(sorted(glob.glob(f"{expert}/**/*.parquet", recursive=True)))
    for module, agent in (("left", "agent_0"), ("right", "agent_1")):
        agent_rows = pc.sum(pc.equal(rows.column("agent_id"), agent)).as_py()
        assert result["data"][module]["rows_per_epoch"] == -(-agent_rows // 512) * 512
    assert min(returns.values()) >= 400, returns
    # RLlib's MultiAgentEpisode.from_state reads the episodes written (as its readers unpack)
    table = pq.read_table(sorted(glob.glob(f"{expert_episodes}/**/*.parquet", recursive=True)))
    assert table.column_names == ["item", "agent_ids"]
    theirs = RLlibEpisode.from_state(msgpack.unpackb(table.column("item")[0].as_py(),
                                                     object_hook=msgpack_numpy.decode))
    assert sorted(theirs.agent_ids) == table.column("agent_ids")[0].as_py() == list(AGENTS)
    assert len(theirs) == max(len(agent) for agent in theirs.agent_episodes.values())


def test_episodes_whose_agents_disagree_with_their_listing_are_named(ray_session,
                                                                     expert_episodes, tmp_path):
    table = pq.read_table(sorted(glob.glob(f"{expert_episodes}/**/*.parquet",
                                           recursive=True))).slice(0, 2)
    listed = pa.array([["agent_0"], ["agent_0", "agent_1"]], pa.list_(pa.string()))
    pq.write_table(table.set_column(1, "agent_ids", listed), tmp_path / "part.parquet")
    only_0 = config(tmp_path, policies=["left", "right"], policies_to_train=["left"],
                    policy_mapping_fn={"agent_0": "left", "agent_1": "right"})
    with pytest.raises(DataFormatError, match=r"part\.parquet \(column 'item'\): episode \S+ "
                                              r"has the agents \['agent_0', 'agent_1'\], but "
                                              r"the column 'agent_ids' lists \['agent_0'\]"):
        with only_0.offline_data(input_read_episodes=True).build() as algo:
            algo.train()


@pytest.mark.parametrize("episodes", [True, False], ids=["episodes", "rows"])
def test_data_in_other_spaces_than_the_modules_is_named(ray_session, expert, expert_episodes,
                                                        episodes):
    wider = config(expert_episodes if episodes else expert, policies=["shared"]).environment(
        env=None, observation_space=gym.spaces.Box(-1, 1, (5,)),
        action_space=gym.spaces.Discrete(2)).offline_data(input_read_episodes=episodes)
    expected = (r"\.parquet: episode \S+ \(agent 'agent_\d'\) was recorded with the observation "
                r"space Box\(.*\(4,\), float32\), but the config's is Box\(-1\.0, 1\.0, \(5,\)"
                if episodes
                else r"\.parquet: column 'obs' holds arrays of shape \(4,\) but the observation "
                     r"space is Box\(-1\.0, 1\.0, \(5,\), float32\)")
    with pytest.raises(DataFormatError, match=expected):
        with wider.build() as algo:
            algo.train()


@pytest.mark.slow
def test_evaluation_episodes_are_recorded_to_output_and_read_back(ray_session, flipped,
                                                                  tmp_path):
    recording = config(flipped, policies=["left", "right"],
                       policy_mapping_fn={"agent_0": "left", "agent_1": "right"}).offline_data(
        output=str(tmp_path / "recorded"), dataset_num_iters_per_learner=5).evaluation(
        evaluation_duration=3)
    with recording.build() as algo:
        algo.train()
        statistics = algo.evaluate()["env_runners"]
    table = pq.read_table(sorted(glob.glob(f"{tmp_path}/recorded/**/*.parquet",
                                           recursive=True)))
    assert table.num_rows == statistics["num_episodes"] == 3
    episode = MultiAgentEpisode.from_state(unpack_episode_state(
        table.column("item")[0].as_py()))
    assert sorted(episode.agent_episodes) == table.column("agent_ids")[0].as_py() == list(AGENTS)
    # the modules sampled their actions and recorded their log-probabilities and logits
    assert set(episode.agent_episodes["agent_1"].extra_model_outputs) == {
        "action_logp", "action_dist_inputs"}
    again = config(tmp_path / "recorded", policies=["shared"]).offline_data(
        input_read_episodes=True, dataset_num_iters_per_learner=2)
    with again.build() as algo:
        trained = algo.train()["learners"]["__all_modules__"]["num_module_steps_trained"]
    assert trained == {"shared": 2 * 512}


def discounted_returns(table: pa.Table, gamma: float = 0.99) -> list[float]:
    """Each episode's discounted return (its rows in ``t`` order)."""
    returns: dict[str, float] = {}
    for eps_id, t, reward in zip(*(table.column(name).to_pylist()
                                   for name in ("eps_id", "t", "rewards"))):
        returns[eps_id] = returns.get(eps_id, 0.0) + gamma ** t * reward
    return list(returns.values())


@pytest.mark.slow
def test_each_module_is_judged_offline_on_its_agents_held_out_data(ray_session, cartpole_data,
                                                                   tmp_path):
    """agent_0 played the expert, agent_1 at random: each module's off-policy estimate of the
    logged return, and its held-out losses, cover its own agent's episodes only."""
    from offline_rl.datasets import make_dataset

    make_dataset("CartPole-v1", tmp_path / "random", tier="random", episodes=5, progress=False)
    parts = {"agent_0": pq.read_table(sorted(glob.glob(f"{cartpole_data}/**/*.parquet",
                                                       recursive=True))).slice(0, 2000),
             "agent_1": pq.read_table(sorted(glob.glob(f"{tmp_path}/random/**/*.parquet",
                                                       recursive=True)))}
    (tmp_path / "held").mkdir()
    named = {agent: table.set_column(table.schema.get_field_index("agent_id"), "agent_id",
                                     pa.array([agent] * table.num_rows))
             for agent, table in parts.items()}
    for agent, table in named.items():
        pq.write_table(table.cast(named["agent_0"].schema), tmp_path / "held" / f"{agent}.parquet")
    judged = config(tmp_path / "held", policies=["left", "right"],
                    policy_mapping_fn={"agent_0": "left", "agent_1": "right"}).evaluation(
        off_policy_estimation_methods={"is": {"type": "ImportanceSampling"}},
        evaluation_config={"input_": str(tmp_path / "held")},
        offline_eval_input_=str(tmp_path / "held"), offline_evaluation_interval=1).offline_data(
        dataset_num_iters_per_learner=2)
    with judged.build() as algo:
        held_out = algo.train()["evaluation"]["offline_eval_runners"]
        estimates = algo.evaluate()["off_policy_estimation"]
    assert held_out["num_env_steps"] == {"left": 2000, "right": parts["agent_1"].num_rows}
    assert np.isfinite(held_out["left"]["total_loss"]) and "total_loss" in held_out["right"]
    for module, agent in (("left", "agent_0"), ("right", "agent_1")):
        assert estimates[module]["is"]["v_behavior"] == pytest.approx(
            np.mean(discounted_returns(parts[agent])), rel=1e-5)


def test_single_agent_episodes_in_multi_agent_input_are_named(ray_session, tmp_path):
    from offline_rl.datasets import make_dataset

    make_dataset("CartPole-v1", tmp_path / "single", tier="random", episodes=2,
                 write_episodes=True, progress=False)
    shared = config(tmp_path / "single", policies=["shared"]).offline_data(
        input_read_episodes=True)
    with pytest.raises(DataFormatError, match=r"\(column 'item'\): single-agent episode \S+ in "
                                              r"the input of a multi-agent config"):
        shared.build()


class TwoCartPoles(ParallelEnv):
    """Two CartPoles as a PettingZoo parallel env, whose agents are ``0`` and ``1``: each
    balances its own pole and leaves the episode when it falls."""

    metadata: ClassVar[dict] = {"name": "two_cartpoles_v0"}

    def __init__(self, env_config: dict | None = None):
        self.possible_agents = [0, 1]
        self.carts = {agent: gym.make("CartPole-v1") for agent in self.possible_agents}
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> gym.Space:
        return self.carts[agent].observation_space

    def action_space(self, agent: str) -> gym.Space:
        return self.carts[agent].action_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        observations = {agent: cart.reset(seed=None if seed is None else seed + number)[0]
                        for number, (agent, cart) in enumerate(self.carts.items())}
        return observations, {agent: {} for agent in self.agents}

    def step(self, actions: dict):
        steps = {agent: self.carts[agent].step(actions[agent]) for agent in self.agents}
        self.agents = [agent for agent, step in steps.items() if not (step[2] or step[3])]
        return tuple({agent: step[field] for agent, step in steps.items()}
                     for field in range(5))


@pytest.mark.parametrize("write_episodes", [True, False], ids=["episodes", "rows"])
@pytest.mark.slow
def test_episodes_recorded_in_a_pettingzoo_env_train_modules_that_play_it(ray_session, tmp_path,
                                                                       write_episodes):
    """Recording round trip: the CartPole expert plays both agents of a PettingZoo env, the
    writer writes the multi-agent episodes (whole, or as rows naming their agents), and a
    module per agent trained on them balances its pole when played in that env. The data
    names the agents ``"0"`` and ``"1"``; the mapping function gets the env's ints."""
    expert = behaviour_policy("CartPole-v1", "expert", seed=0)
    env = make_multi_agent_env(TwoCartPoles)
    writer = EpisodeWriter(str(tmp_path / "recorded"), env_name="two_cartpoles",
                           write_episodes=write_episodes)
    for episode in multi_agent_rollout(
            [env], {"expert": lambda obs: (np.array([expert(row)[0] for row in obs]), {})},
            {0: "expert", 1: "expert"}, 10, seed=0):
        writer.add([episode])
    writer.flush()
    env.close()
    modules = (config(tmp_path / "recorded", policies=["a", "b"],
                      policy_mapping_fn=lambda agent_id, episode, **kwargs:
                      "a" if agent_id == 0 else "b")
               .environment(env=TwoCartPoles)
               .offline_data(input_read_episodes=write_episodes))
    with modules.build() as algo:
        for _ in range(4):
            algo.train()
        returns = algo.evaluate()["env_runners"]["agent_episode_returns_mean"]
    assert min(returns.values()) >= 400, returns


@pytest.fixture(scope="module")
def pendulum_agents(tmp_path_factory) -> Path:
    """Pendulum ``mixed`` episodes given alternately to the ``AGENTS``."""
    from offline_rl.datasets import make_dataset

    folder = tmp_path_factory.mktemp("ma")
    make_dataset("Pendulum-v1", folder / "single", tier="mixed", episodes=4, progress=False)
    return multi_agent_rows(folder / "single", folder / "agents")


@pytest.mark.parametrize(("algorithm", "env"), [
    ("MARWIL", "CartPole-v1"), ("DiscreteCQL", "CartPole-v1"), ("IQL", "Pendulum-v1"),
    ("TD3BC", "Pendulum-v1"), ("CQL", "Pendulum-v1")])
@pytest.mark.slow
def test_every_algorithm_trains_a_module_per_agent(ray_session, flipped, pendulum_agents,
                                                   tmp_path, algorithm, env):
    """Independent learners of each algorithm: a module per agent, each with its learner's
    losses (IQL on discrete actions: ``test_iql_beats_bc_for_every_agent_on_flawed_data``);
    CQL (several networks and optimizers, actions sampled in every update) restored from a
    checkpoint continues with the same losses."""
    from offline_rl.algorithms.registry import get_algorithm_config_class

    spaces = gym.make(env)
    modules = (get_algorithm_config_class(algorithm)()
               .environment(observation_space=spaces.observation_space,
                            action_space=spaces.action_space)
               .training(train_batch_size_per_learner=64)
               .rl_module(model_config={"fcnet_hiddens": [16]})
               .offline_data(input_=str(flipped if env == "CartPole-v1" else pendulum_agents),
                             dataset_num_iters_per_learner=2)
               .multi_agent(policies=["left", "right"],
                            policy_mapping_fn={"agent_0": "left", "agent_1": "right"})
               .debugging(seed=0))
    with modules.build() as algo:
        first = algo.train()
        checkpoint = algo.save_to_path(tmp_path / "checkpoint") if algorithm == "CQL" else None
        second = algo.train()
    assert first["learners"]["__all_modules__"]["num_module_steps_trained"] == {
        "left": 2 * 64, "right": 2 * 64}
    losses = module_losses(second)
    assert set(losses) == {"left", "right"} and losses["left"].keys() == losses["right"].keys()
    assert losses["left"] and all(np.isfinite(value) for module in losses.values()
                                  for value in module.values())
    if checkpoint:
        with Algorithm.from_checkpoint(checkpoint) as restored:
            assert module_losses(restored.train()) == losses


@pytest.fixture(scope="module")
def flawed(tmp_path_factory) -> list[str]:
    """``MultiAgentCartPole`` data of 20 ``medium`` episodes (the CartPole expert with a flaw
    in some states) and 10 ``expert`` ones: in the flawed states most logged actions are
    wrong, and only the returns tell them apart."""
    from offline_rl.datasets import make_dataset

    folder = tmp_path_factory.mktemp("ma")
    for number, (tier, episodes) in enumerate((("medium", 20), ("expert", 10))):
        make_dataset("MultiAgentCartPole", folder / tier, tier=tier, episodes=episodes,
                     seed=100 * number, progress=False)
    return [str(folder / "medium"), str(folder / "expert")]


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_iql_beats_bc_for_every_agent_on_flawed_data(ray_session, flawed):
    """BC copies the flaw (with seed 0, after 8 iterations of 250 updates: agent_0 470,
    agent_1 433.5); IQL, weighing the logged actions by their advantage, balances both poles
    (500 and 500)."""
    from offline_rl.algorithms.iql import IQLConfig

    returns = {}
    for config_class in (BCConfig, IQLConfig):
        shared = (config_class().environment("MultiAgentCartPole")
                  .offline_data(input_=flawed, dataset_num_iters_per_learner=250)
                  .evaluation(evaluation_interval=None, evaluation_duration=10)
                  .multi_agent(policies=["shared"])
                  .debugging(seed=0))
        with shared.build() as algo:
            for _ in range(8):
                algo.train()
            returns[config_class.__name__] = algo.evaluate()["env_runners"][
                "agent_episode_returns_mean"]
    for agent in AGENTS:
        assert returns["IQLConfig"][agent] >= max(returns["BCConfig"][agent] + 10, 475), returns


def test_the_multi_agent_section_round_trips_and_checks_its_modules():
    mapped = BCConfig().multi_agent(policies={"b", "a"}, policy_mapping_fn={"x": "a"},
                                    policies_to_train=["a"])
    assert BCConfig.from_dict(mapped.to_dict()).sections.multi_agent == mapped.sections.multi_agent
    problems = dict(BCConfig().multi_agent(policies=["a", "a/.."]).problems())
    assert problems["policies"].startswith("must be None or a non-empty list of distinct "
                                           "module ids")
    problems = dict(BCConfig().multi_agent(policies=["a", "b"], policies_to_train=["c"])
                    .offline_data(input_read_episodes=True).problems())
    assert problems["policies_to_train"] == "names modules that policies does not: ['c']"
    assert problems["policy_mapping_fn"] == ("2 modules need a mapping of each agent to its "
                                             "module (tabular rows without one go to the "
                                             "module their module_id column names)")
    problems = dict(BCConfig().multi_agent(policies=["a"]).offline_data(
        output=lambda context: None, output_write_sample_batches=True,
        output_write_episodes=False, output_write_method="write_json").problems())
    assert problems["output"].startswith("a custom writer's creator: a multi-agent config "
                                         "records its evaluation episodes with offline-rl's")
    assert problems["output_write_sample_batches"].startswith("a multi-agent config records "
                                                              "MultiAgentEpisodes or their")


def test_the_cli_trains_a_multi_agent_yaml_config(ray_session, flipped, tmp_path, capsys):
    from offline_rl.cli import main

    config = tmp_path / "two-agents.yaml"
    config.write_text(
        "algorithm: BC\nenvironment: {env: MultiAgentCartPole}\n"
        f"offline_data: {{input_: {flipped}, dataset_num_iters_per_learner: 5}}\n"
        "multi_agent: {policies: [left, right], "
        "policy_mapping_fn: {agent_0: left, agent_1: right}}\n")
    assert main(["train", str(config), "--max-iterations", "2",
                 "--output-dir", str(tmp_path / "run")]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["iterations"] == 2
    header = (tmp_path / "run" / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"learners/left/total_loss", "learners/right/total_loss"} <= set(header)
    (title, _, draw_losses), *_ = panels([flatten(result)
                                          for result in read_results(tmp_path / "run")])
    axes = Figure().subplots()
    draw_losses(axes)
    assert title == "losses" and {"left/total_loss", "right/total_loss"} <= {
        line.get_label() for line in axes.get_lines()}
    assert sorted(p.name for p in Path(summary["checkpoint"]).iterdir()) == [
        "algorithm_state.json", "config.yaml", "left", "right"]
    assert main(["evaluate", summary["checkpoint"], "--episodes", "2"]) == 0
    evaluated = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert evaluated["num_episodes"] == 2
    assert set(evaluated["module_episode_returns_mean"]) == {"left", "right"}


def test_datasets_make_records_rows_naming_each_agent(tmp_path, capsys):
    from offline_rl.cli import main

    for name in ("a", "b"):
        assert main(["datasets", "make", "AlternatingCartPole", "mixed", "--episodes", "3",
                     "--out", str(tmp_path / name)]) == 0
    card = json.loads(capsys.readouterr().out.splitlines()[-1])
    tables = [pq.read_table(sorted(glob.glob(f"{tmp_path / name}/**/*.parquet",
                                             recursive=True))) for name in ("a", "b")]
    # the same seed records the same rows (episode ids are fresh uuids)
    assert tables[0].drop_columns("eps_id").equals(tables[1].drop_columns("eps_id"))
    rows = tables[0]
    assert rows.column("agent_id").to_pylist() == rows.column("module_id").to_pylist()
    counts = {entry["values"]: entry["counts"]
              for entry in rows.column("agent_id").value_counts().to_pylist()}
    # the agents take turns on one cart: agent_0 acts first, so as often as agent_1 or once more
    assert counts["agent_0"] - counts["agent_1"] in (0, 1, 2, 3)
    assert card["num_env_steps"] == rows.num_rows and card["num_episodes"] == 3
    assert set(card["agent_episode_returns_mean"]) == {"agent_0", "agent_1"}


def test_multi_agent_batches_rllib_wrote_train_each_policys_module(ray_session, flipped,
                                                                   tmp_path):
    """Old-stack MultiAgentBatch JSON, written by RLlib's own JsonWriter: each line holds a
    SampleBatch per policy, and the module of each policy id trains on its batches."""
    from ray.rllib.offline.json_writer import JsonWriter
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    columns = ("eps_id", "t", "obs", "new_obs", "actions", "rewards", "terminateds",
               "truncateds")
    batches = {}
    for policy, agent in (("left", "agent_0"), ("right", "agent_1")):
        rows = pq.read_table(flipped / f"{agent}.parquet")
        batches[policy] = {name: rows.column(name).to_numpy(zero_copy_only=False)
                           for name in columns}
        for name in ("obs", "new_obs"):
            batches[policy][name] = np.stack(batches[policy][name])
    writer = JsonWriter(str(tmp_path / "json"))
    for line in range(8):  # each line: the next eighth of both policies' rows
        writer.write(MultiAgentBatch({
            policy: SampleBatch({name: np.array_split(values, 8)[line]
                                 for name, values in batch.items()})
            for policy, batch in batches.items()}, env_steps=0))
    config_ = (config(tmp_path / "json", policies=["left", "right"],
                      policy_mapping_fn={"agent_0": "left", "agent_1": "right"})
               .offline_data(input_read_method="read_json", input_read_sample_batches=True))
    with config_.build() as algo:
        for _ in range(4):
            result = algo.train()
        returns = algo.evaluate()["env_runners"]["agent_episode_returns_mean"]
    assert returns["agent_0"] >= 400 and returns["agent_1"] <= 30, returns
    assert result["learners"]["__all_modules__"]["num_module_steps_trained"] == {
        "left": 40 * 512, "right": 40 * 512}


def test_a_single_agent_sample_batch_in_multi_agent_input_is_named(ray_session, tmp_path):
    line = {"type": "SampleBatch", "obs": [[0.0] * 4], "new_obs": [[0.0] * 4], "actions": [0],
            "rewards": [1.0], "terminateds": [True]}
    (tmp_path / "single.json").write_text(json.dumps(line) + "\n")
    mixed_up = (config(tmp_path, policies=["shared"])
                .offline_data(input_read_method="read_json", input_read_sample_batches=True))
    with pytest.raises(DataFormatError, match=r"single\.json.*: a single-agent SampleBatch "
                                              r"line in the input of a multi-agent config "
                                              r"\(module 'shared'\)"), \
            mixed_up.build() as algo:
        algo.train()


# ------------------------------------------------------- data whose agents cannot be told apart
CARTPOLE_SPACES = {"observation_space": MultiAgentCartPole().observation_spaces["agent_0"],
                   "action_space": MultiAgentCartPole().action_spaces["agent_0"]}


def without_env(data: Path, **multi_agent) -> BCConfig:
    return config(data, **multi_agent).environment(env=None, **CARTPOLE_SPACES)


def test_a_policy_mapping_fn_that_raises_is_named_with_the_agent(flipped):
    def by_number(agent_id, episode, **kwargs):
        return ["left", "right"][int(agent_id[-1]) + 1]

    with pytest.raises(ConfigError, match=r"policy_mapping_fn .*by_number\('agent_1', "
                                          r"episode=None\) raised IndexError: list index out "
                                          r"of range") as caught:
        config(flipped, policies=["left", "right"], policy_mapping_fn=by_number).build()
    assert type(caught.value.__cause__) is IndexError


def agent_episode_items(*agents) -> list[bytes]:
    """One packed multi-agent episode per agent id of ``agents`` (``m0``, ``m1``, ...)."""
    from offline_rl.codec import pack_multi_agent_episode_state

    items = []
    for number, agent in enumerate(agents):
        episode = MultiAgentEpisode(f"m{number}")
        episode.add_env_reset({agent: np.zeros(4, np.float32)})
        episode.add_env_step({agent: np.full(4, 0.01, np.float32)}, {agent: 1}, {agent: 1.0},
                             terminateds={"__all__": True})
        items.append(pack_multi_agent_episode_state(episode.to_numpy().get_state()))
    return items


def test_agent_ids_0_and_the_text_0_are_refused_naming_both(tmp_path):
    pq.write_table(pa.table({"item": agent_episode_items(0, "0")}), tmp_path / "part.parquet")
    with pytest.raises(DataFormatError, match=r"part\.parquet \(column 'item'\), episode m1: the "
                                              r"agent ids 0 \(int, in .*part\.parquet \(column "
                                              r"'item'\), episode m0\) and '0' \(str\) are two "
                                              r"agents whose ids read as one"):
        without_env(tmp_path, policies=["shared"]).offline_data(
            input_read_episodes=True).build()


def test_agent_ids_0_and_the_text_0_in_files_of_other_id_types_are_refused(ray_session,
                                                                          tmp_path):
    """Tabular rows: a Parquet column has one type, so 0 and '0' can meet only across files,
    one of integer agent ids and one of text ids, and files must agree on a column's type."""
    for name, agents in (("ints", [0, 1]), ("texts", ["0", "2"])):
        pq.write_table(pa.table({"agent_id": agents, "eps_id": ["e", "e"], "t": [0, 1],
                                 "obs": [[0.0] * 4] * 2, "new_obs": [[0.0] * 4] * 2,
                                 "actions": [0, 1], "rewards": [1.0, 1.0],
                                 "terminateds": [False, True]}), tmp_path / f"{name}.parquet")
    with pytest.raises(DataFormatError, match=r"column 'agent_id' is int64 in .*ints\.parquet but "
                                              r"string in .*texts\.parquet; the input files must "
                                              r"agree on each column's type"):
        without_env(tmp_path, policies=["shared"]).build()


@pytest.mark.slow
def test_agent_ids_0_and_the_text_0_named_alike_by_the_agent_ids_column_are_refused(
        ray_session, tmp_path):
    """The ``agent_ids`` column holds text: episodes of agent 0 and of agent '0' in two files
    are told apart where the PreLearners decode them, across actors (the ledger's)."""
    for name, item in zip(("a", "b"), agent_episode_items(0, "0")):
        pq.write_table(pa.table({"item": [item], "agent_ids": [["0"]]}),
                       tmp_path / f"{name}.parquet")
    shared = without_env(tmp_path, policies=["shared"]).training(
        train_batch_size_per_learner=2).offline_data(input_read_episodes=True,
                                                     dataset_num_iters_per_learner=1)
    with pytest.raises(DataFormatError, match=r"the agent ids (0 \(int, in .*a\.parquet: "
                                              r"episode m0\) and '0' \(str\)|'0' \(str, in "
                                              r".*b\.parquet: episode m1\) and 0 \(int\)) are "
                                              r"two agents whose ids read as one"):
        with shared.build() as algo:
            algo.train()


def test_multi_agent_batch_policies_that_are_not_configured_are_named(tmp_path):
    batch = {"obs": [[0.0] * 4] * 2, "new_obs": [[0.0] * 4] * 2, "actions": [0, 1],
             "rewards": [1.0, 1.0], "terminateds": [False, True]}
    line = {"type": "MultiAgentBatch", "count": 2,
            "policy_batches": {"pursuer": batch, "evader": batch}}
    (tmp_path / "ma.json").write_text(json.dumps(line) + "\n")
    with pytest.raises(ConfigError, match=r"the modules \['left'\] are to be trained, but no "
                                          r"MultiAgentBatch line .* policy ids are \['evader', "
                                          r"'pursuer'\], the configured policies \['left'\]"):
        without_env(tmp_path, policies=["left"]).offline_data(
            input_read_sample_batches=True, input_read_method="read_json").build()


@pytest.mark.slow
def test_agents_of_one_module_with_other_observation_shapes_are_named(ray_session, tmp_path):
    def agent_rows(agent: str, width: int) -> pa.Table:
        return pa.table({"eps_id": [agent] * 4, "agent_id": [agent] * 4, "t": list(range(4)),
                         "obs": [[0.01] * width] * 4, "new_obs": [[0.01] * width] * 4,
                         "actions": [0, 1, 0, 1], "rewards": [1.0] * 4,
                         "terminateds": [False] * 3 + [True]})

    pq.write_table(pa.concat_tables([agent_rows("agent_0", 4), agent_rows("agent_1", 3)]),
                   tmp_path / "part.parquet")
    shared = without_env(tmp_path, policies=["shared"]).training(
        train_batch_size_per_learner=8).offline_data(dataset_num_iters_per_learner=1)
    with pytest.raises(DataFormatError, match=r"the agents \['agent_0', 'agent_1'\] of one "
                                              r"module have rows of column 'obs' of different "
                                              r"shapes: 'agent_0' \(4,\), 'agent_1' \(3,\)"):
        with shared.build() as algo:
            algo.train()


# ------------------------------------- RLlib's form: a MultiRLModuleSpec of modules with spaces
PLANE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
#: Two scripted experts on the same observations: each module's rows are its expert's actions.
EXPERTS = {"m1": lambda obs: (obs[:, 0] > 0).astype(np.int64),
           "m2": lambda obs: (obs[:, 1] > 0).astype(np.int64)}


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> Path:
    """400 rows per agent (``a1`` played by ``m1``'s expert, ``a2`` by ``m2``'s), each naming
    its agent and module, as RLlib's writer does."""
    folder = tmp_path_factory.mktemp("ma") / "labelled"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for agent, module in (("a1", "m1"), ("a2", "m2")):
        obs = rng.uniform(-1, 1, (400, 2)).astype(np.float32)
        pq.write_table(pa.table({
            "eps_id": [f"{agent}-{row // 20}" for row in range(400)], "agent_id": [agent] * 400,
            "module_id": [module] * 400, "t": [row % 20 for row in range(400)],
            "obs": list(obs), "new_obs": list(obs), "actions": EXPERTS[module](obs),
            "rewards": [1.0] * 400, "terminateds": [row % 20 == 19 for row in range(400)]}),
            folder / f"{agent}.parquet")
    return folder


def module_specs(**spaces: tuple[gym.Space | None, gym.Space | None]) -> BCConfig:
    """BC without an env, each module's spaces in its own ``RLModuleSpec``."""
    from offline_rl import RLModuleSpec
    from offline_rl.models.multi_rl_module import MultiRLModuleSpec

    return BCConfig().rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
        module_id: RLModuleSpec(observation_space=obs, action_space=actions)
        for module_id, (obs, actions) in spaces.items()}))


@pytest.mark.parametrize("routing", ["policy_mapping_fn", "module_id"])
@pytest.mark.slow
def test_modules_of_a_multi_rl_module_spec_learn_their_own_experts_without_an_env(
        ray_session, labelled, routing):
    """The multi-agent bar: two modules given by ``MultiRLModuleSpec`` with their spaces, no
    env, tabular rows routed by the mapping of their agents, or by their ``module_id``."""
    mapping = ({"policy_mapping_fn": lambda agent_id, episode, **kwargs:
                "m1" if agent_id == "a1" else "m2"} if routing == "policy_mapping_fn" else {})
    config = (module_specs(m1=(PLANE, gym.spaces.Discrete(2)),
                           m2=(PLANE, gym.spaces.Discrete(2)))
              .multi_agent(policies={"m1", "m2"}, **mapping)
              .training(lr=3e-3, train_batch_size_per_learner=64)
              .offline_data(input_=str(labelled), dataset_num_iters_per_learner=20)
              .debugging(seed=0))
    held_out = np.random.default_rng(1).uniform(-1, 1, (500, 2)).astype(np.float32)
    with config.build() as algo:
        assert algo.mapping == {"a1": "m1", "a2": "m2"}
        for _ in range(2):
            result = algo.train()
        greedy = {module: algo.get_module(module).compute_actions(held_out)
                  for module in EXPERTS}
    assert result["learners"]["__all_modules__"]["num_module_steps_trained"] == {
        "m1": 20 * 64, "m2": 20 * 64}
    for module, other in (("m1", "m2"), ("m2", "m1")):
        assert np.mean(greedy[module] == EXPERTS[module](held_out)) >= 0.95
        assert np.mean(greedy[module] == EXPERTS[other](held_out)) <= 0.75


def test_a_module_spec_whose_spaces_do_not_fit_its_rows_is_named(ray_session, labelled):
    wide = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    config = (module_specs(m1=(wide, gym.spaces.Discrete(2)), m2=(PLANE, gym.spaces.Discrete(2)))
              .multi_agent(policies=["m1", "m2"])
              .offline_data(input_=str(labelled), dataset_num_iters_per_learner=1))
    with pytest.raises(DataFormatError, match=r"^module 'm1' \(whose spaces are those its "
                                              r"RLModuleSpec in rl_module\(rl_module_spec=\.\.\.\) "
                                              r"sets: fix them there\): .*column 'obs' holds rows "
                                              r"of shape \(2,\) .* but the observation space "
                                              r"Box\(-1\.0, 1\.0, \(3,\), float32\)"):
        with config.build() as algo:
            algo.train()


def test_module_specs_that_leave_a_module_out_or_without_spaces_are_named(labelled, tmp_path):
    unset = module_specs(m1=(PLANE, gym.spaces.Discrete(2)), m2=(PLANE, gym.spaces.Discrete(2)))
    assert dict(unset.problems())["rl_module_spec"].startswith(
        "the MultiRLModuleSpec names the modules ['m1', 'm2'], which train as a multi-agent "
        "config: set config.multi_agent(policies=")
    unknown = module_specs(m1=(PLANE, gym.spaces.Discrete(2)), m3=(PLANE, gym.spaces.Discrete(2)))
    assert dict(unknown.multi_agent(policies=["m1", "m2"]).problems())["rl_module_spec"] == (
        "the MultiRLModuleSpec names modules that policies does not: ['m3'] (policies: ['m1', "
        "'m2']); add them to config.multi_agent(policies=...), or leave their specs out")
    no_spaces = module_specs(m1=(PLANE, gym.spaces.Discrete(2)), m2=(PLANE, None)).multi_agent(
        policies=["m1", "m2"]).offline_data(input_=str(labelled))
    with pytest.raises(ConfigError, match=r"environment: module 'm2' has no action_space: give "
                                          r"it in its spec \(rl_module\(rl_module_spec=Multi"
                                          r"RLModuleSpec\(rl_module_specs=\{'m2': RLModuleSpec"):
        no_spaces.build()
    # a spec for all, or config.environment's spaces, give the module left out its spaces
    assert not no_spaces.environment(action_space=gym.spaces.Discrete(2)).problems()
    # rows naming a module the config does not have, or an agent of two modules
    pq.write_table(pa.table({"agent_id": ["a3"], "module_id": ["m3"]}), tmp_path / "m3.parquet")
    routed = no_spaces.offline_data(input_=[str(labelled), str(tmp_path / "m3.parquet")])
    with pytest.raises(ConfigError, match=r"the rows of agent 'a3' name the module 'm3' in "
                                          r"column 'module_id', which no module of the config "
                                          r"is \(policies: \['m1', 'm2'\]\): add it to config"):
        routed.build()
    pq.write_table(pa.table({"agent_id": ["a1"], "module_id": ["m2"]}), tmp_path / "m3.parquet")
    with pytest.raises(DataFormatError, match=r"the rows of agent 'a1' name the modules \['m1', "
                                              r"'m2'\] in column 'module_id' \(.*a1\.parquet, "
                                              r".*m3\.parquet\); an agent's rows train one "
                                              r"module"):
        routed.build()
    pq.write_table(pa.table({"agent_id": ["a1"]}), tmp_path / "m3.parquet")
    with pytest.raises(DataFormatError, match=r"m3\.parquet: without a policy_mapping_fn, each "
                                              r"row goes to the module its column 'module_id' "
                                              r"names, and the file has no such column"):
        routed.build()
