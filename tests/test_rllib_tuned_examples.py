"""RLlib 2.60's tuned offline examples (``rllib/tuned_examples/{bc,marwil}``) with only
their imports changed reach their stop returns, on expert data RLlib itself recorded
(``tests/rllib_experts.py``: RLlib's recording env runner playing scripted experts, as RLlib's
``cartpole-v1_large`` holds expert episodes). CQL's and IQL's Pendulum examples do not reach
their returns within the suite's time yet (``docs/rllib.md``).

Each test builds the example's config as the example does, from ``offline_rl`` imports, and
runs it through ``run_rllib_example_script_experiment`` with ``--as-test`` (which raises unless
the stop return is reached). Only what a 2-CPU machine cannot hold, or the suite's time, is
changed; each test's docstring says what.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from offline_rl import (
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    TIMERS,
    TRAINING_ITERATION,
    TRAINING_ITERATION_TIMER,
    BCConfig,
    MARWILConfig,
    add_rllib_example_script_args,
    run_rllib_example_script_experiment,
)
from offline_rl.errors import ConfigError, TrainingError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
#: The BC and MARWIL examples call ``api_stack()``, which lands in a change of its own.
RETURN = f"{EVALUATION_RESULTS}/{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"
#: Episodes recorded per env: 10 x 500 CartPole steps.
EPISODES = {"CartPole-v1": 10}


@pytest.fixture(scope="module")
def rllib_data(ray_session, tmp_path_factory) -> dict[str, Path]:
    """RLlib's recordings of the scripted experts (seconds each)."""
    from tests.rllib_experts import record_expert

    root = tmp_path_factory.mktemp("rllib-expert-data")
    return {env: record_expert(env, root / env, episodes) for env, episodes in EPISODES.items()}


def example_args(*extra: str):
    """The examples' ``args``, as their ``parser.parse_args()`` gives them with ``--as-test``
    (and ``--no-tune``, where said)."""
    return add_rllib_example_script_args().parse_args(["--as-test", *extra])


def run_example(config, args, stop) -> tuple[dict, float]:
    """Runs the example's last line; returns the last result and the seconds it took."""
    started = time.perf_counter()
    results = run_rllib_example_script_experiment(config, args, stop=stop)
    seconds = time.perf_counter() - started
    last = results if isinstance(results, dict) else results[0].metrics
    print(f"{type(config).__name__}: {evaluation_return(last):.1f} after "
          f"{last[TRAINING_ITERATION]} iterations, {seconds:.0f} s")
    return last, seconds


def evaluation_return(result: dict) -> float:
    return result[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]


def test_cartpole_bc(rllib_data):
    """``cartpole_bc.py``. Changed: none but the data path (``local://`` as the example
    writes it). Through Ray Tune, as the example runs by default."""
    args = example_args()
    data_path = "local://" + rllib_data["CartPole-v1"].as_posix()
    config = (
        BCConfig()
        .environment(env="CartPole-v1")
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .evaluation(evaluation_interval=3, evaluation_num_env_runners=1, evaluation_duration=5,
                    evaluation_parallel_to_training=True)
        .offline_data(input_=[data_path],
                      input_read_method_kwargs={"override_num_blocks": max(args.num_gpus, 1)},
                      prelearner_module_synch_period=20)
        .training(lr=0.0008 * max(1, args.num_gpus**0.5), train_batch_size_per_learner=2000)
    )
    stop = {RETURN: 120.0, TRAINING_ITERATION_TIMER: 350.0}
    last, seconds = run_example(config, args, stop)
    assert evaluation_return(last) >= 120.0
    assert last[TRAINING_ITERATION] <= 350 and seconds < 150


def test_cartpole_marwil(rllib_data):
    """``cartpole_marwil.py``. Changed: its PreLearner pool (2 actors of 2 CPUs) to 1 of 1,
    as 4 CPUs do not fit 2; ``--no-tune``."""
    args = example_args("--no-tune")
    data_path = rllib_data["CartPole-v1"]
    config = (
        MARWILConfig()
        .environment(env="CartPole-v1")
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .evaluation(evaluation_interval=3, evaluation_num_env_runners=1, evaluation_duration=5,
                    evaluation_parallel_to_training=True)
        .offline_data(input_=[data_path.as_posix()],
                      input_read_method_kwargs={"override_num_blocks": max(args.num_gpus * 2, 2)},
                      map_batches_kwargs={"concurrency": 2, "num_cpus": 2},
                      iter_batches_kwargs={"prefetch_batches": 1},
                      dataset_num_iters_per_learner=1 if args.num_gpus == 0 else None)
        .training(beta=1.0, lr=0.0008 * max(1, args.num_gpus**0.5),
                  train_batch_size_per_learner=1024)
    )
    config.offline_data(map_batches_kwargs={"concurrency": 1, "num_cpus": 1})  # 2 CPUs
    stop = {RETURN: 250.0, NUM_ENV_STEPS_SAMPLED_LIFETIME: 500000}
    last, seconds = run_example(config, args, stop)
    assert evaluation_return(last) >= 250.0 and last[NUM_ENV_STEPS_SAMPLED_LIFETIME] <= 500000
    assert last[TIMERS][TRAINING_ITERATION_TIMER] < 60 and seconds < 150


def test_as_test_raises_when_the_stop_return_is_not_reached(rllib_data):
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_=str(rllib_data["CartPole-v1"]),
                            dataset_num_iters_per_learner=1)
              .training(train_batch_size_per_learner=64)
              .evaluation(evaluation_interval=1, evaluation_duration=1))
    args = example_args("--no-tune")
    with pytest.raises(TrainingError, match=r"`evaluation/env_runners/episode_return_mean` of "
                                            r"10000.0 not reached! Best value reached is \d"):
        run_rllib_example_script_experiment(config, args, stop={RETURN: 10000.0,
                                                                TRAINING_ITERATION: 1})


def test_arguments_offline_rl_cannot_honour_are_refused():
    parser = add_rllib_example_script_args()
    assert "Not supported by offline-rl" in parser.format_help()
    for flags, match in ((["--num-gpus", "1"], "--num-gpus=1 is the old stack's option"),
                         (["--old-api-stack"], "new API stack only"),
                         (["--wandb-key", "k"], "--wandb-key: not supported")):
        with pytest.raises(ConfigError, match=match):
            run_rllib_example_script_experiment(BCConfig(), parser.parse_args(flags))
