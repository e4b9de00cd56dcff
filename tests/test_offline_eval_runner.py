"""RLlib 2.60's offline evaluation runner as its tests use it: ``OfflineEvaluationRunner(config=
...)`` on an iterator of ``algo.offline_data.sample(return_iterator=True, num_shards=0)``, and
every offline-evaluation keyword of RLlib's ``evaluation()`` (the real RLlib is read for the
list)."""

from __future__ import annotations

import inspect
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest
import ray.data
import torch

from offline_rl import (
    COMPONENT_RL_MODULE,
    DEFAULT_MODULE_ID,
    EVALUATION_RESULTS,
    OFFLINE_EVAL_RUNNER_RESULTS,
    TOTAL_EVAL_LOSS_KEY,
    AlgorithmConfig,
    BCConfig,
    MultiRLModule,
    OfflineData,
    OfflineEvaluationRunner,
    OfflineEvaluationRunnerGroup,
    OfflinePolicyEvaluationRunner,
)
from offline_rl.errors import ConfigError, TrainingError
from offline_rl.names import ALL_MODULES

TABULAR = "local://" + str(Path(__file__).parent / "fixtures" / "rllib_cartpole_tabular"
                           / "cartpoleenv")
ENV = gym.make("CartPole-v1")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "rllib.md"


def rllib_test_config() -> BCConfig:
    """The config of RLlib's runner tests: BC with the env's spaces, no env."""
    return (BCConfig()
            .environment(observation_space=ENV.observation_space, action_space=ENV.action_space)
            .offline_data(input_=[TABULAR], dataset_num_iters_per_learner=1)
            .training(train_batch_size_per_learner=256)
            .evaluation(num_offline_eval_runners=2, offline_eval_batch_size_per_runner=64))


def rewards_mean(runner, *, module_id, config, batch, fwd_out):
    """A custom ``offline_loss_for_module_fn`` (RLlib's signature): the logged rewards' mean."""
    assert isinstance(runner, OfflineEvaluationRunner) and module_id == DEFAULT_MODULE_ID
    return batch["rewards"].mean() + 0 * fwd_out["action_dist_inputs"].sum()


def test_runner_built_from_the_config_alone():
    runner = OfflineEvaluationRunner(config=rllib_test_config())
    assert isinstance(runner.config, BCConfig) and isinstance(runner.module, MultiRLModule)
    assert list(runner.module) == [DEFAULT_MODULE_ID] and callable(runner._loss_for_module_fn)
    with pytest.raises(ConfigError, match=r"no dataset iterator; call set_dataset_iterator"):
        runner.run()
    with pytest.raises(ConfigError, match=r"takes \{'rl_module': \{'default_policy': weights"):
        runner.set_state({"module": {}})
    with pytest.raises(ConfigError, match="environment: set env=, or both observation_space="):
        OfflineEvaluationRunner(config=BCConfig().offline_data(input_=[TABULAR]))


@pytest.mark.parametrize(("keywords", "message"), [
    ({"offline_evaluation_type": "wis"}, r"offline_evaluation_type.*'eval_loss', 'is' or "
                                         r"'pdis'"),
    ({"restart_failed_offline_eval_runners": True}, "streaming_split shard cannot move"),
    ({"num_gpus_per_offline_eval_runner": 1}, "the runners evaluate on CPU"),
    ({"offline_eval_rl_module_inference_only": True}, "the loss needs the learner's whole"),
    ({"offline_loss_for_module_fn": rewards_mean, "offline_eval_input_": TABULAR},
     "offline_loss_for_module_fn: is the loss OfflineEvaluationRunner computes"),
])
def test_offline_evaluation_options_refused_say_why(keywords, message):
    with pytest.raises(ConfigError, match=message):
        rllib_test_config().evaluation(**keywords).validate()


def test_every_offline_evaluation_keyword_of_rllibs_evaluation_is_one_here_and_documented():
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig as RLlibConfig

    theirs = {name for name in inspect.signature(RLlibConfig.evaluation).parameters
              if "offline" in name}
    ours = set(inspect.signature(AlgorithmConfig.evaluation).parameters)
    assert theirs <= ours, sorted(theirs - ours)
    docs = DOCS.read_text()
    assert not [name for name in theirs if f"`{name}`" not in docs]


@pytest.fixture(scope="module")
def algo(ray_session):
    algo = rllib_test_config().build()
    yield algo
    algo.stop()


@pytest.mark.slow
def test_runner_evaluates_the_algorithms_data_with_the_learners_loss(algo):
    iterators = algo.offline_data.sample(num_samples=64, return_iterator=True, num_shards=0)
    assert len(iterators) == 1 and isinstance(iterators[0], ray.data.DataIterator)
    runner = OfflineEvaluationRunner(config=algo.config)
    runner.set_dataset_iterator(iterator=iterators[0])
    one_row = runner.run(num_samples=1)
    assert one_row[DEFAULT_MODULE_ID]["num_module_steps_sampled"] == 1
    metrics = runner.run()
    assert metrics[ALL_MODULES]["num_env_steps_sampled"] == 64
    assert metrics[ALL_MODULES]["num_env_steps_sampled_lifetime"] == 65
    assert metrics[ALL_MODULES]["dataset_num_iters_evaluated_lifetime"] == 2
    runner.stop()

    # The trained weights, the whole data (200 rows) in one batch: the learner's own loss.
    whole = OfflineEvaluationRunner(config=algo.config.copy().evaluation(
        offline_eval_batch_size_per_runner=1000, dataset_num_iters_per_offline_eval_runner=None))
    whole.set_state(algo.offline_data.learner_handles[0].get_state(
        component=COMPONENT_RL_MODULE))
    whole.set_dataset_iterator(iterator=iterators[0])
    loss = whole.run()[DEFAULT_MODULE_ID][TOTAL_EVAL_LOSS_KEY]
    rows = next(iter(iterators[0].iter_batches(batch_size=1000, batch_format="numpy")))
    assert len(rows["actions"]) == 200
    assert loss == pytest.approx(algo.learner_group.loss_metrics([rows])["total_loss"])
    whole.stop()

    custom = OfflineEvaluationRunner(config=algo.config.copy().evaluation(
        offline_loss_for_module_fn=rewards_mean))
    custom.set_dataset_iterator(iterator=iterators[0])
    assert custom.run()[DEFAULT_MODULE_ID][TOTAL_EVAL_LOSS_KEY] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match=r"forward_train outputs; call run\(explore=False"):
        custom.run(explore=True)
    custom.stop()


@pytest.mark.slow
def test_runner_group_evaluates_shards_of_the_training_input_with_the_trained_weights(algo):
    group = algo.offline_eval_runner_group
    assert group.num_runners == group.num_remote_runners == 2 and group.local_runner is None
    assert isinstance(group._offline_data, OfflineData)
    assert len(group._offline_data_iterators) == 2
    assert all(isinstance(shard, ray.data.DataIterator) for shard in group._offline_data_iterators)
    runs = group.foreach_runner("run", local_runner=False)
    assert len(runs) == 2 and all(TOTAL_EVAL_LOSS_KEY in run[DEFAULT_MODULE_ID] for run in runs)
    assert [run[ALL_MODULES]["num_env_steps_sampled"] for run in runs] == [64, 64]

    algo.train()
    merged = algo.evaluate_offline()[OFFLINE_EVAL_RUNNER_RESULTS]
    # Each shard holds 100 of the 200 rows: a batch of 64, then the 36 left, per runner.
    assert merged[ALL_MODULES]["num_env_steps_sampled"] == 72
    assert merged[ALL_MODULES]["num_env_steps_sampled_lifetime"] == 200
    trained = algo.learner_group.module.state_dict()
    for state in group.foreach_runner("get_state"):
        weights = state[COMPONENT_RL_MODULE][DEFAULT_MODULE_ID]
        assert all(torch.equal(torch.as_tensor(weights[name]), value.cpu())
                   for name, value in trained.items())

    with pytest.raises(TrainingError, match=r"offline evaluation runner 0 failed: .*Division.*"
                                            r"set config\.evaluation\(ignore_offline_eval_runner"):
        group.foreach_runner(lambda runner: 1 / 0)


@pytest.mark.slow
def test_local_runner_and_offline_evaluation_interval_on_the_training_input(ray_session):
    config = rllib_test_config().evaluation(num_offline_eval_runners=0,
                                            offline_evaluation_interval=2)
    with config.build() as algo:
        results = [algo.train() for _ in range(4)]
        group = algo.offline_eval_runner_group
        assert group.num_remote_runners == 0
        assert isinstance(group.local_runner._dataset_iterator, ray.data.DataIterator)
        module_state = algo.learner_group.module.state_dict()
    assert EVALUATION_RESULTS not in results[0] and EVALUATION_RESULTS not in results[2]
    evaluated = [result[EVALUATION_RESULTS][OFFLINE_EVAL_RUNNER_RESULTS]
                 for result in results[1::2]]
    assert [run[ALL_MODULES]["num_env_steps_sampled_lifetime"] for run in evaluated] == [64, 128]
    assert all(run[DEFAULT_MODULE_ID][TOTAL_EVAL_LOSS_KEY] > 0 for run in evaluated)

    local = OfflineEvaluationRunnerGroup(config=config, local_runner=True,
                                         module_state={DEFAULT_MODULE_ID: module_state})
    assert len(local.foreach_runner("run", local_runner=True)) == 1
    local.stop()
    with pytest.raises(ConfigError, match=r"num_offline_eval_runners=2 and local_runner=True"):
        OfflineEvaluationRunnerGroup(config=rllib_test_config(), local_runner=True)


def importance_sampled_returns(module, rows) -> tuple[np.ndarray, np.ndarray]:
    """Per ended episode of ``rows`` (tabular steps), by hand: its return times the product
    of its steps' ratios (``"is"``), and the rewards weighed by the ratios up to each step
    (``"pdis"``)."""
    with torch.no_grad():
        logits = module.forward_inference({"obs": torch.as_tensor(
            np.stack(rows["obs"]), dtype=torch.float32)})["action_dist_inputs"]
    target = torch.softmax(logits, -1).numpy()[np.arange(len(rows["actions"])),
                                               rows["actions"]]
    ratios = target / np.exp(rows["action_logp"])
    ended = set(np.asarray(rows["eps_id"])[rows["terminateds"] | rows["truncateds"]])
    trajectory, per_decision = [], []
    for eps_id in ended:
        steps = np.asarray(rows["eps_id"]) == eps_id
        trajectory.append(np.prod(ratios[steps]) * rows["rewards"][steps].sum())
        per_decision.append(np.sum(np.cumprod(ratios[steps]) * rows["rewards"][steps]))
    return np.array(trajectory), np.array(per_decision)


@pytest.mark.slow
def test_policy_evaluation_runner_estimates_the_return_by_importance_sampling(ray_session):
    config = rllib_test_config().evaluation(
        num_offline_eval_runners=0, offline_evaluation_interval=2, offline_evaluation_type="is",
        offline_eval_batch_size_per_runner=64, dataset_num_iters_per_offline_eval_runner=None)
    table = pq.read_table(TABULAR.removeprefix("local://"))
    rows = {name: table.column(name).to_numpy(zero_copy_only=False) for name in (
        "eps_id", "obs", "actions", "rewards", "terminateds", "truncateds", "action_logp")}
    with config.build() as algo:
        group = algo.offline_eval_runner_group
        assert isinstance(group.local_runner, OfflinePolicyEvaluationRunner)
        results = [algo.train() for _ in range(2)]
        estimated = results[1][EVALUATION_RESULTS][OFFLINE_EVAL_RUNNER_RESULTS]
        trained = algo.learner_group.module
        trajectory, per_decision = importance_sampled_returns(trained, rows)

        # A pass over the 200 rows in batches of 64: the episodes that span batches are
        # valued once their last step has come; the one episode the data leaves unended is
        # counted, not valued.
        assert estimated[ALL_MODULES]["num_env_steps_sampled"] == 200
        assert estimated[ALL_MODULES]["dataset_num_iters_evaluated"] == 4
        assert estimated["num_episodes"] == len(trajectory) == 10
        assert estimated["num_episodes_unfinished"] == 1
        assert estimated["episode_return_mean"] == pytest.approx(trajectory.mean(), rel=1e-5)
        assert estimated["episode_return_max"] == pytest.approx(trajectory.max(), rel=1e-5)
        assert estimated["behavior_episode_return_mean"] == pytest.approx(
            np.mean([rows["rewards"][np.asarray(rows["eps_id"]) == eps_id].sum()
                     for eps_id in set(np.asarray(rows["eps_id"])[rows["terminateds"]
                                                                  | rows["truncateds"]])]))

        pdis = OfflinePolicyEvaluationRunner(config=config.copy().evaluation(
            offline_evaluation_type="pdis", offline_eval_batch_size_per_runner=1000))
        pdis.set_state({COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: trained.state_dict()}})
        pdis.set_dataset_iterator(iterator=group._offline_data_iterators[0])
        run = pdis.run()
        assert run["episode_return_mean"] == pytest.approx(per_decision.mean(), rel=1e-5)
        assert run[DEFAULT_MODULE_ID]["module_sample_batch_size_mean"] == 200
        pdis.stop()

    # Episode rows are whole episodes: each batch's are valued.
    episodes = config.copy().offline_data(input_=[TABULAR.replace("tabular", "episodes")],
                                          input_read_episodes=True)
    runner = OfflinePolicyEvaluationRunner(config=episodes)
    runner.set_dataset_iterator(iterator=OfflineData(episodes).data.iterator())
    run = runner.run()
    assert run["num_episodes"] == 20 and run["num_episodes_unfinished"] == 0
    assert run[ALL_MODULES]["num_env_steps_sampled"] == 20 * run["episode_len_mean"]
    with pytest.raises(ConfigError, match=r"offline_evaluation_type must be one of \['is', "
                                          r"'pdis'\], got 'eval_loss'"):
        OfflinePolicyEvaluationRunner(config=rllib_test_config())
