"""The ``"sampler"`` share of ``input_``: env runners playing the current policy online, their
episodes mixed into each train batch at the given weight, recorded while training."""

from __future__ import annotations

import re
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offline_rl import Algorithm, BCConfig
from offline_rl.algorithms.dqn.dqn import DQNConfig
from offline_rl.cli import main
from offline_rl.errors import ConfigError, DataFormatError, EnvError, ResourceError
from offline_rl.formats.episode_input import decode_episode
from tests.envs import LosesConnection, NeverEnds

BATCH = 100
UPDATES = 4


def sampler_config(config_class, data: Path, weight: float = 0.3):
    return (config_class().environment("CartPole-v1")
            .training(train_batch_size_per_learner=BATCH)
            .offline_data(input_={str(data): 1 - weight, "sampler": weight},
                          dataset_num_iters_per_learner=UPDATES)
            .env_runners(num_env_runners=2, num_cpus_per_env_runner=0)
            .debugging(seed=0))


@pytest.mark.slow
def test_bc_batches_hold_exactly_the_sampler_share(ray_session, cartpole_data, tmp_path):
    config = sampler_config(BCConfig, cartpole_data)
    with config.build() as algo:
        results = [algo.train() for _ in range(3)]
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
    for result in results:
        learner = result["learners"]["per_learner"][0]
        assert learner["num_updates"] == UPDATES
        # 30 % of every batch of 100 rows came from the online replay buffer.
        assert learner["num_online_rows_trained"] == 30 * UPDATES
        assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == BATCH * UPDATES
        sampled = result["env_runners"]
        assert sampled["num_env_steps_sampled"] >= 30 * UPDATES
        assert sampled["num_episodes"] >= 1 and sampled["episode_return_mean"] > 0
        assert len(sampled["env_steps_per_s_per_runner"]) == 2
        assert all(rate > 0 for rate in sampled["env_steps_per_s_per_runner"])
    # Synced every train(): iteration i's episodes were played with the weights after
    # iteration i - 2's updates (the first two with the initial ones).
    assert [r["env_runners"]["weights_version"] for r in results] == [0, 0, UPDATES]
    lifetime = sum(r["env_runners"]["num_env_steps_sampled"] for r in results)
    assert results[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == lifetime

    with Algorithm.from_checkpoint(checkpoint) as restored:
        assert restored.online.state()["num_env_steps_sampled_lifetime"] == lifetime
        result = restored.train()
    assert result["training_iteration"] == 4
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] == (
        lifetime + result["env_runners"]["num_env_steps_sampled"])
    assert result["learners"]["per_learner"][0]["num_online_rows_trained"] == 30 * UPDATES


@pytest.mark.slow
def test_dqn_two_learners_explore_and_record_while_training(ray_session, cartpole_data,
                                                            tmp_path):
    output = tmp_path / "online"
    config = (sampler_config(DQNConfig, cartpole_data, weight=0.25)
              .training(exploration_config={"type": "EpsilonGreedy", "final_epsilon": 0.2})
              .learners(num_learners=2, num_cpus_per_learner=0.25)
              .offline_data(output=str(output), map_batches_kwargs={"num_cpus": 0.5}))
    with config.build() as algo:
        results = [algo.train() for _ in range(2)]
        sampled = sum(r["env_runners"]["num_episodes"] for r in results)
    for result in results:
        per_learner = result["learners"]["per_learner"]
        assert [learner["num_online_rows_trained"] for learner in per_learner] == [
            25 * UPDATES] * 2
    files = sorted(output.rglob("*.parquet"))
    episodes = [decode_episode(item, str(file)) for file in files
                for item in pq.read_table(file).column("item").to_pylist()]
    # Every episode the runners played was recorded (the round still running at stop too).
    assert len(episodes) >= sampled and all(episode.is_done for episode in episodes)


def test_sampler_without_an_env_is_refused():
    config = (BCConfig().environment(observation_space=None)
              .offline_data(input_={"data/expert": 0.8, "sampler": 0.2}))
    with pytest.raises(ConfigError, match=r"'sampler' plays the policy in an env: set "
                                          r"config.environment\(env=...\)"):
        config.validate()


@pytest.mark.parametrize(("input_", "message"), [
    ({"sampler": 1.0}, "mixes only the sampler"),
    ({"data/a": 0.7, "sampler": float("nan")}, "source 'sampler': the weight must be"),
])
def test_bad_mixes_are_refused(input_, message):
    config = BCConfig().environment("CartPole-v1").offline_data(input_=input_)
    with pytest.raises(ConfigError, match=message):
        config.validate()


@pytest.mark.parametrize(("input_", "intensity", "message"), [
    ("data/a", 8, r"training_intensity: it sets how many online rows are trained per env step "
                  r"sampled: mix 'sampler' into input_"),
    ({"data/a": 0.7, "sampler": 0.3}, 0,
     r"training_intensity: must be None or a number > 0, got 0"),
], ids=["without-sampler", "zero"])
def test_training_intensity_needs_the_sampler_and_a_positive_ratio(input_, intensity, message):
    config = (BCConfig().environment("CartPole-v1").offline_data(input_=input_)
              .training(training_intensity=intensity))
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_sampler_runners_that_do_not_fit_beside_the_pipeline_are_refused(ray_session,
                                                                         cartpole_data):
    # One runner of 1 CPU, asked for, beside a PreLearner and the read task on 2 CPUs.
    config = sampler_config(BCConfig, cartpole_data).env_runners(num_env_runners=1,
                                                                 num_cpus_per_env_runner=1)
    with pytest.raises(ResourceError, match=r"1 CPU for learners and env runners = 3 CPUs.*"
                                            r"num_cpus_per_env_runner: 0 shares the CPUs"):
        config.build()


@pytest.mark.parametrize(("options", "message"), [
    ({"prelearner_class": "tests.prelearners:NegatedRewards"},
     r"prelearner_class NegatedRewards has its own __call__, which online rows would bypass.*"
     r"learner_connector=\.\.\."),
    ({"materialize_mapped_data": False},
     r"the learner connector needs the module \(e\.g\. MARWIL's advantages\): online rows"),
], ids=["own-call", "needs-module"])
def test_what_online_rows_cannot_go_through_is_refused_before_any_ray_work(
        cartpole_data, options, message):
    """Online rows are episodes that only the learner connector pipeline maps: a PreLearner's
    own ``__call__`` and pieces that need the module would be bypassed or fail later."""
    import gymnasium as gym
    import numpy as np

    from offline_rl import OfflineData

    config = BCConfig().offline_data(input_={str(cartpole_data): 0.7, "sampler": 0.3}, **options)
    if "prelearner_class" not in options:
        config.training(learner_connector="tests.learners:add_module_logits")
    spaces = (gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))
    with pytest.raises(ConfigError, match=message):
        OfflineData(config.data_config(spaces), spaces)


def test_online_rows_follow_the_batch_share_and_offline_columns():
    import gymnasium as gym
    import numpy as np

    from offline_rl import SingleAgentEpisode
    from offline_rl.data.feed.online_rows import OnlineRows
    from offline_rl.errors import DataFormatError

    spaces = (gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2))
    config = (BCConfig().training(train_batch_size_per_learner=10)
              .offline_data(input_={"data/a": 2, "sampler": 1}).data_config(spaces))
    online = OnlineRows(config, seed=0)
    assert online.num_rows(10) == 0  # nothing sampled yet: all rows offline
    online.add([SingleAgentEpisode(observations=[[0.5]] * 4, actions=[1] * 3,
                                   rewards=[1.0] * 3, terminated=True,
                                   len_lookback_buffer=0).get_state()])
    counts = []
    for _ in range(6):
        count = online.num_rows(10)
        offline = {"obs": np.zeros((10 - count, 1), np.float32),
                   "actions": np.zeros(10 - count, np.int64)}
        batch = online.mixed_into(offline, count)
        assert len(batch["obs"]) == 10 and batch["actions"].sum() == count
        counts.append(count)
    # A third of 10 rows: 3 or 4 per batch, exactly 20 in 6 batches.
    assert counts == [3, 4, 3, 3, 4, 3] and online.rows_taken == 20
    with pytest.raises(DataFormatError, match=r"columns \['advantages'\] that the sampler"):
        online.mixed_into({"obs": np.zeros((7, 1), np.float32),
                           "actions": np.zeros(7, np.int64),
                           "advantages": np.zeros(7, np.float32)}, 3)


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_an_env_whose_episodes_never_end_is_cut_or_named_in_bounded_time(ray_session,
                                                                         cartpole_data):
    """Issue 79: with "sampler" in input_, such an env made train() never return."""
    started = time.monotonic()
    config = (sampler_config(BCConfig, cartpole_data).environment(NeverEnds)
              .env_runners(num_env_runners=1, max_episode_steps=25)
              .evaluation(evaluation_duration=2))
    with config.build() as algo:
        # (train()'s warning says the same of the sampler's env runner 0; pytest.warns cannot
        # catch it reliably there: Ray Data's threads enter and leave catch_warnings meanwhile)
        sampled = algo.train()["env_runners"]
        with pytest.warns(UserWarning, match=r"evaluate\(\): episodes of env "
                                             r"'tests.envs.NeverEnds' that reach "
                                             r"max_episode_steps=25"):
            evaluated = algo.evaluate()["env_runners"]
    assert sampled["num_episodes_cut"] == sampled["num_episodes"] >= 1
    assert sampled["episode_len_mean"] == evaluated["episode_len_mean"] == 25
    # No cap (the env has no spec): each player raises once an episode outruns its timeout.
    uncapped = (config.copy().env_runners(max_episode_steps=None, sample_timeout_s=1)
                .evaluation(evaluation_sample_timeout_s=1))
    with uncapped.build() as algo:
        with pytest.raises(EnvError, match=r"the sampler's env runner 0: episode 0 of env "
                                           r"'tests.envs.NeverEnds' ran 1\.\d s \(\d+ steps\) "
                                           r"without ending, over the limit of 1 s \(env_runners"
                                           r"\(sample_timeout_s=...\)\).*env_runners\("
                                           r"max_episode_steps=...\)"):
            algo.train()
        with pytest.raises(EnvError, match=r"evaluate\(\): episode 0 of env .* over the limit "
                                           r"of 1 s \(evaluation\(evaluation_sample_timeout_s"):
            algo.evaluate()
    assert time.monotonic() - started < 180


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_an_env_that_raises_is_named_by_the_sampler_evaluation_and_record(
        ray_session, cartpole_data, tmp_path, capsys):
    """Issue 79: the env's error reached the user as RayTaskError(RuntimeError)."""
    named = (r"env '{env}' raised RuntimeError: simulator connection lost in step\(\) after 2 "
             r"step\(s\) of episode 0, played by {player}\. The error is the env's own")
    config = (sampler_config(BCConfig, cartpole_data).environment(LosesConnection)
              .env_runners(num_env_runners=1)
              .evaluation(evaluation_duration=2, evaluation_num_env_runners=1))
    with config.build() as algo:
        with pytest.raises(EnvError, match=named.format(
                env="tests.envs.LosesConnection", player="the sampler's env runner 0")) as error:
            algo.train()
        assert isinstance(error.value.__cause__.cause, RuntimeError)  # the env's own, via Ray
        with pytest.raises(EnvError, match=named.format(
                env="tests.envs.LosesConnection", player="evaluation env runner 0")):
            algo.evaluate()
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
    record = tmp_path / "record.yaml"
    record.write_text("algorithm: BC\nenvironment: {env: 'tests.envs:LosesConnection-v0'}\n")
    assert main(["record", str(record), checkpoint, "--episodes", "2",
                 "--output", str(tmp_path / "recorded")]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.match("offline-rl: error: " + named.format(
        env="LosesConnection-v0", player="recording env runner 0"), last), last


def test_env_spaces_other_than_the_data_are_refused_at_build(cartpole_data):
    """Issue 79: the policy's action 2 reached CartPole as RayTaskError(AssertionError)."""
    config = sampler_config(BCConfig, cartpole_data).environment(
        "CartPole-v1", observation_space=gym.spaces.Box(-5, 5, (4,), np.float32),
        action_space=gym.spaces.Discrete(3))
    with pytest.raises(ConfigError, match=r"config.environment\(action_space=Discrete\(3\)\) is "
                                          r"not the action space of env 'CartPole-v1', "
                                          r"Discrete\(2\).*drop action_space="):
        config.build()


def test_env_box_bounds_and_dtypes_other_than_the_configured_are_named_at_build(tmp_path):
    """An action Box with other bounds scales the policy's actions otherwise: refused; an
    observation Box with other bounds is warned of; another dtype is another space."""
    def pendulum(**spaces) -> BCConfig:
        return BCConfig().environment("Pendulum-v1", **spaces).offline_data(input_=str(tmp_path))

    with pytest.warns(UserWarning, match=r"observation_space=Box\(-5.0, 5.0, \(3,\), float32\)"
                                         r"\) has the bounds .*but the observation space of "
                                         r"env 'Pendulum-v1' has low=\[-1. -1. -8.\]"), \
            pytest.raises(ConfigError, match=r"config.environment\(action_space=Box\(-1.0, 1.0, "
                                             r"\(1,\), float32\)\) has the bounds low=\[-1.\], "
                                             r"high=\[1.\], but the action space of env "
                                             r"'Pendulum-v1' has low=\[-2.\], high=\[2.\]: the "
                                             r"policy scales its actions.*drop it to take the "
                                             r"env's"):
        pendulum(observation_space=gym.spaces.Box(-5, 5, (3,), np.float32),
                 action_space=gym.spaces.Box(-1, 1, (1,), np.float32)).build()
    with pytest.raises(ConfigError, match=r"observation_space=Box\(-5.0, 5.0, \(3,\), float64\)"
                                          r"\) is not the observation space of env "
                                          r"'Pendulum-v1', Box\(.*float32\)"):
        pendulum(observation_space=gym.spaces.Box(-5, 5, (3,), np.float64)).build()


def test_data_spaces_other_than_the_envs_are_refused_at_build_without_configured_spaces(
        tmp_path):
    """Without configured spaces, the env's are the data's: an episode recorded in others is
    named by build()'s check of the first rows."""
    from offline_rl import SingleAgentEpisode
    from offline_rl.codec import pack_episode_state

    episode = SingleAgentEpisode(
        "e1", observations=[[0.0] * 4, [0.01] * 4], actions=[2], rewards=[1.0], terminated=True,
        observation_space=gym.spaces.Box(-5, 5, (4,), np.float32),
        action_space=gym.spaces.Discrete(3), len_lookback_buffer=0).to_numpy()
    pq.write_table(pa.table({"item": [pack_episode_state(episode.get_state())]}),
                   tmp_path / "part.parquet")
    config = BCConfig().environment("CartPole-v1").offline_data(input_=str(tmp_path),
                                                                input_read_episodes=True)
    with pytest.raises(DataFormatError, match=r"part\.parquet.*episode e1 was recorded with "
                                              r"the action space Discrete\(3\), but the "
                                              r"config's is Discrete\(2\)"):
        config.build()


def unreachable_simulator(env_config: dict) -> gym.Env:
    raise ConnectionError(f"no simulator at {env_config['host']}")


@pytest.mark.parametrize(("creator", "error", "message"), [
    (unreachable_simulator, EnvError,
     r"the env creator unreachable_simulator\(env_config=\{'host': 'sim:9000'\}\) raised "
     r"ConnectionError: no simulator at sim:9000; fix the creator or its env_config"),
    (lambda env_config: "CartPole-v1", ConfigError,
     r"the env creator .*<lambda> returned str, not a gymnasium.Env; return the env itself"),
])
def test_an_env_creator_that_fails_is_named(cartpole_data, creator, error, message):
    config = sampler_config(BCConfig, cartpole_data).environment(
        creator, env_config={"host": "sim:9000"})
    with pytest.raises(error, match=message):
        config.build()


@pytest.mark.parametrize(("options", "message"), [
    ({"max_episode_steps": 0},
     "max_episode_steps: must be None \\(the env spec's\\) or an int >= 1"),
    ({"sample_timeout_s": -1}, "sample_timeout_s: must be None \\(no limit\\) or a number > 0"),
])
def test_episode_limits_are_validated(options, message):
    with pytest.raises(ConfigError, match=message):
        BCConfig().environment("CartPole-v1").env_runners(**options).validate()
