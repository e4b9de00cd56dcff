"""The off-policy estimation examples of RLlib's old-stack "Working with offline data" pages
(the seeds 000 and 001), run with offline-rl's imports in place of ``ray.rllib``'s.

Deviations, each said where it happens:
- The seeds train DQN; BC on the scripted CartPole expert's data stands in (``cartpole_data``),
  and its estimates are checked against the expert's own logged returns, which a policy
  cloned from the expert should about match.
- The data is the expert's Parquet rows, so ``JsonReader(path).next()`` becomes a Ray
  Dataset's batches of them and ``evaluation_config`` names them with ``input_``; the estimation
  runs without env runners, so there are none.

``tests/test_seed_examples_old_stack.py`` runs the same examples as the seeds write them
(``JsonReader``, ``.framework("torch")``, ``evaluation_num_workers``, ``evaluation_config=
{"input": ...}``) on the SampleBatch JSON the seeds' commands record, with DQN.
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import ray

from offline_rl import BCConfig, SingleAgentEpisode
from offline_rl.datasets import make_dataset
from offline_rl.errors import ConfigError
from offline_rl.evaluation.off_policy import (
    DATASET_ESTIMATE_KEYS,
    ESTIMATE_KEYS,
    DirectMethod,
    DoublyRobust,
    FQETorchModel,
    ImportanceSampling,
    WeightedImportanceSampling,
)

CARTPOLE_SPACES = {"observation_space": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
                   "action_space": gym.spaces.Discrete(2)}


@pytest.fixture(scope="module")
def cartpole_eval(tmp_path_factory) -> str:
    """The seed's ``/tmp/cartpole-eval``: four more episodes of the expert, not trained on."""
    path = tmp_path_factory.mktemp("cartpole-eval")
    make_dataset("CartPole-v1", path, tier="expert", episodes=4, seed=11, progress=False)
    return str(path)


@pytest.fixture(scope="module")
def algo(ray_session, cartpole_data):
    """``algo = DQN(...); ...  # train policy offline``: BC, cloning the expert."""
    config = (BCConfig().environment(**CARTPOLE_SPACES)
              .training(lr=3e-3, train_batch_size_per_learner=1024)
              .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=20)
              .debugging(seed=0))
    with config.build() as built:
        for _ in range(2):
            built.train()
        yield built


def read_rows(path: str) -> ray.data.Dataset:
    """The Parquet rows under ``path`` (beside them, the dataset's card)."""
    return ray.data.read_parquet(path, file_extensions=["parquet"])


def logged_steps(path: str) -> pd.DataFrame:
    """The rows under ``path``, in this process."""
    return pd.concat([pq.read_table(file).to_pandas()
                      for file in sorted(Path(path).rglob("*.parquet"))])


def logged_return(path: str, gamma: float) -> float:
    """The mean discounted return of the episodes under ``path``."""
    steps = logged_steps(path)
    return float(np.mean([(gamma ** episode["t"] * episode["rewards"]).sum()
                          for _, episode in steps.groupby("eps_id")]))


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_the_estimator_python_api_trains_a_q_model_and_estimates_batches(
        algo, cartpole_data, cartpole_eval):
    estimator = DoublyRobust(
        policy=algo.get_policy(),
        gamma=0.99,
        q_model_config={"type": FQETorchModel, "n_iters": 160},
    )
    # Train estimator's Q-model; only required for DM and DR estimators
    reader = read_rows(str(cartpole_data)).limit(2048)  # two of the seed's batches
    for batch in reader.iter_batches(batch_size=1024, batch_format="numpy"):
        trained = estimator.train(batch)
        assert list(trained) == ["loss"] and math.isfinite(trained["loss"])
    # Compute off-policy estimates
    reader = read_rows(cartpole_eval)
    batch = reader.take_batch(reader.count())
    estimate = estimator.estimate(batch)
    assert list(estimate) == list(ESTIMATE_KEYS)
    assert all(math.isfinite(value) for value in estimate.values()), estimate
    assert estimate["v_behavior"] == pytest.approx(logged_return(cartpole_eval, 0.99))
    # A Q-model this briefly trained is biased, but its estimate stays a CartPole return.
    assert 0 < estimate["v_target"] < 1.1 * estimate["v_behavior"], estimate


@pytest.mark.timeout(300)
def test_estimate_on_dataset_gives_rllib_keys_and_the_clone_is_worth_the_expert(
        algo, cartpole_data, cartpole_eval):
    # gamma 0.9: a horizon of about ten steps, which the Q-models learn within their default
    # iterations on the few held-out episodes.
    held_out = read_rows(cartpole_eval)
    logged = logged_return(cartpole_eval, 0.9)
    for kind in (WeightedImportanceSampling, DirectMethod, DoublyRobust):
        estimator = kind(algo.get_policy(), gamma=0.9)
        estimator.train(held_out.take_batch(held_out.count()))
        estimate = estimator.estimate_on_dataset(held_out, n_parallelism=2)
        assert list(estimate) == list(DATASET_ESTIMATE_KEYS), kind
        assert all(math.isfinite(value) for value in estimate.values()), (kind, estimate)
        assert estimate["v_behavior"] == pytest.approx(logged)
        assert estimate["v_gain_mean"] == pytest.approx(1.0, abs=0.1), (kind, estimate)
        assert estimate["v_gain_ste"] >= 0, (kind, estimate)


def test_the_old_stack_estimates_one_episode_at_a_time(algo, cartpole_eval):
    steps = logged_steps(cartpole_eval)
    rows = steps[steps["eps_id"] == steps["eps_id"].iloc[0]].sort_values("t")
    episode = SingleAgentEpisode(
        observations=[*rows["obs"], rows["new_obs"].iloc[-1]], actions=list(rows["actions"]),
        rewards=list(rows["rewards"]), terminated=bool(rows["terminateds"].iloc[-1]),
        extra_model_outputs={"action_logp": list(rows["action_logp"])}, len_lookback_buffer=0)
    estimator = WeightedImportanceSampling(algo.get_policy(), gamma=0.99)
    columns = {name: np.stack(rows[name]) for name in
               ("eps_id", "t", "obs", "actions", "rewards", "new_obs", "terminateds",
                "action_logp")}
    assert estimator.estimate(episode) == pytest.approx(estimator.estimate(columns))
    actions, state_outs, extra = algo.get_policy().compute_actions(np.stack(rows["obs"]))
    assert actions.shape == (len(rows),) and state_outs == [] and extra == {}
    # A clone of the expert takes most of the expert's actions.
    assert np.mean(actions == rows["actions"].to_numpy()) > 0.8


def seed_config(cartpole_data, cartpole_eval: str, q_model_config: dict) -> BCConfig:
    """The seed's ``DQNConfig()...evaluation(...)``, BC in place of DQN."""
    return (
        BCConfig()
        .environment(**CARTPOLE_SPACES)
        .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=2)
        .evaluation(
            evaluation_interval=1,
            evaluation_duration=10,
            evaluation_duration_unit="episodes",
            evaluation_config={"input_": cartpole_eval},
            off_policy_estimation_methods={
                "is": {"type": ImportanceSampling},
                "wis": {"type": WeightedImportanceSampling},
                "dm_fqe": {
                    "type": DirectMethod,
                    "q_model_config": {"type": FQETorchModel, "polyak_coef": 0.05},
                },
                "dr_fqe": {
                    "type": DoublyRobust,
                    "q_model_config": q_model_config,
                },
            },
        )
    )


@pytest.mark.timeout(300)
def test_the_seed_config_estimates_every_iteration(cartpole_data, cartpole_eval, ray_session):
    config = seed_config(cartpole_data, cartpole_eval,
                         {"type": FQETorchModel, "polyak_coef": 0.05, "n_iters": 20})
    with config.build() as algo:
        estimates = algo.train()["evaluation"]["off_policy_estimation"]
    assert sorted(estimates) == ["dm_fqe", "dr_fqe", "is", "wis"]
    for name, estimate in estimates.items():
        model_keys = ["loss"] if name.endswith("fqe") else []
        assert list(estimate) == [*ESTIMATE_KEYS, *model_keys], name
        assert all(math.isfinite(value) for value in estimate.values()), (name, estimate)


@pytest.mark.parametrize(("q_model_config", "message"), [
    ({"type": FQETorchModel, "polyak": 0.05}, r"q_model_config has unknown keys \['polyak'\]"),
    ({"type": FQETorchModel, "n_iters": 0}, r"q_model_config n_iters must be an int >= 1, "
                                            r"got 0"),
    ({"type": FQETorchModel, "lr": "fast"}, r"q_model_config lr must be a number, got 'fast'"),
    ({"type": DoublyRobust}, r"q_model_config type <class '.*DoublyRobust'> is no Q-model"),
    ({"type": "never_imported:FQE"}, r"q_model_config type names 'never_imported:FQE', but "
                                     r".*not imported"),
])
def test_a_bad_q_model_config_fails_the_build_naming_the_estimator_and_key(
        cartpole_data, cartpole_eval, ray_session, q_model_config, message):
    config = seed_config(cartpole_data, cartpole_eval, q_model_config)
    with pytest.raises(ConfigError, match=r"off_policy_estimation_methods\['dr_fqe'\]: "
                                          rf"DoublyRobust: {message}"):
        config.build()
