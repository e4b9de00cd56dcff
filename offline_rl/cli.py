"""The ``offline-rl`` command line: train from a config, evaluate a checkpoint, make datasets."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from collections import deque
from pathlib import Path
from typing import Any

from offline_rl.cli_arguments import build_parser, describe, import_modules
from offline_rl.errors import ConfigError, OutputError

#: Iterations the progress bar's env steps/s is averaged over.
THROUGHPUT_WINDOW = 20


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``offline-rl`` console script; returns the exit status.

    Every failure ends the command with exit status 2 and ``offline-rl: error: <message>`` as
    the last line on stderr: a bad argument (argparse's message), an error about the data,
    config or cluster (ours, which names the place and the fix), a file that cannot be read or
    written (its path and the reason); ``--verbose`` prints the traceback (Ray's included)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a bad argument (2, message already printed)
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        import_modules(args.imports)
        return COMMANDS[args.command](args)
    except Exception as error:
        if args.verbose:
            traceback.print_exception(error)
        print(f"offline-rl: error: {describe(error)}", file=sys.stderr)
        return 2


#: RLlib's ``--stop`` keys (``/`` joins nested keys), and what each bounds.
STOP_KEYS = {"training_iteration": "iterations", "timesteps_total": "env_steps",
             "num_env_steps_trained_lifetime": "env_steps", "time_total_s": "seconds",
             **{key: "return" for key in (
                 "episode_reward_mean", "episode_return_mean", "env_runners/episode_return_mean",
                 "evaluation/episode_reward_mean", "evaluation/env_runners/episode_return_mean")}}


def _train_config(args: argparse.Namespace) -> tuple[Any, Path]:
    """The config of ``train`` and the run's folder: the YAML file's config, or ``--run``'s
    algorithm with its defaults; then ``--env`` and ``--config`` (RLlib's flat JSON keys,
    old-stack ones translated) over it. ``output: "logdir"`` is the run folder's
    ``experiences``."""
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig
    from offline_rl.algorithms.registry import get_algorithm_config_class

    if (args.config is None) == (args.run is None):
        raise ConfigError("give either a YAML config file or --run ALGO (RLlib's form, with "
                          "--env, --config and --stop), " + ("not both" if args.run else
                                                             "one of them"))
    config = (AlgorithmConfig.from_yaml(args.config) if args.config
              else get_algorithm_config_class(args.run)())
    if args.env is not None:
        config.environment(args.env)
    values = dict(args.config_json or {})
    logdir = values.get("output") == "logdir"
    if logdir:
        del values["output"]
    config.update_from_dict(values)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    output = args.resume or args.output_dir or Path("runs") / f"{config.algo_name}-{stamp}"
    if logdir:
        config.update_from_dict({"output": str(output / "experiences")})
    return config, output


def _stop_criteria(args: argparse.Namespace) -> dict[str, float]:
    """``--stop`` by what each criterion bounds (``STOP_KEYS``), with ``--max-iterations`` and
    ``--stop-return`` where it sets none; ``ConfigError`` for keys offline-rl cannot stop on."""
    stop: dict[str, float] = {"iterations": args.max_iterations}
    if args.stop_return is not None:
        stop["return"] = args.stop_return
    pending = list((args.stop or {}).items())
    while pending:
        key, value = pending.pop()
        if isinstance(value, dict):
            pending += [(f"{key}/{inner}", nested) for inner, nested in value.items()]
        elif key in STOP_KEYS and isinstance(value, int | float) and not isinstance(value, bool):
            stop[STOP_KEYS[key]] = value
        else:
            raise ConfigError(f"--stop {key}={value!r}: offline-rl stops on a number for one of "
                              f"{sorted(STOP_KEYS)}")
    return stop


def _train(args: argparse.Namespace) -> int:
    config, output = _train_config(args)  # a bad config fails before Ray's imports
    stop = _stop_criteria(args)

    from tqdm import tqdm

    from offline_rl.algorithms.algorithm import Algorithm
    from offline_rl.algorithms.checkpoint import check_checkpoint_path
    from offline_rl.algorithms.checkpoint_schedule import PeriodicCheckpoints, newest_checkpoint
    from offline_rl.algorithms.ray_start import start_ray
    from offline_rl.monitoring import ResultLog
    from offline_rl.monitoring.result_log import PROGRESS_FILE, RESULT_FILE

    if args.checkpoint_frequency is not None:
        config.checkpointing(checkpoint_frequency=args.checkpoint_frequency)
    if args.keep_checkpoints is not None:
        config.checkpointing(keep_checkpoints_num=args.keep_checkpoints)
    if "return" in stop and config.sections.evaluation.evaluation_interval is None:
        flag = "--stop-return" if args.stop_return is not None else "--stop on a return"
        raise ConfigError(f"{flag} needs evaluation: set evaluation_interval (the config's "
                          "evaluation section)")
    if output.exists() and not output.is_dir():
        raise OutputError(f"output folder {output} is a file; name a folder with --output-dir")
    replaced = [name for name in (PROGRESS_FILE, RESULT_FILE) if (output / name).exists()]
    if replaced and not args.resume and not args.overwrite:
        raise OutputError(f"--output-dir {output} already holds {' and '.join(replaced)} (an "
                          "earlier run's results?) and training would replace them: continue "
                          f"that run with --resume {output}, choose another --output-dir, or "
                          "pass --overwrite to replace them")
    check_checkpoint_path(output / "checkpoint",  # before training, not after it
                          module_folders=config.sections.multi_agent.trained_modules)
    resumed_from = newest_checkpoint(args.resume) if args.resume else None
    checkpointing = config.sections.checkpointing
    checkpoints = PeriodicCheckpoints(output, frequency=checkpointing.checkpoint_frequency,
                                      keep=checkpointing.keep_checkpoints_num)
    started = time.perf_counter()
    if args.verbose:  # otherwise build() starts Ray, quietly, once it has checked the data
        start_ray(verbose=True)
    algo = (Algorithm.from_checkpoint(resumed_from, config) if resumed_from
            else config.build())
    output.mkdir(parents=True, exist_ok=True)  # once the config and its data are known good
    reached, dropped = None, {}
    with (algo, ResultLog(output, resume_after=algo.iteration if resumed_from else None)
          as writer, tqdm(total=int(stop["iterations"]), initial=algo.iteration, unit="iter",
                          desc=f"training {config.algo_name}") as bar):
        last_return = float("nan")
        recent = deque(maxlen=THROUGHPUT_WINDOW)
        for _ in range(int(stop["iterations"]) - algo.iteration):
            result = algo.train()
            writer.write(result)
            dropped = result.get("data", {}).get("dropped") or dropped
            checkpoints.after_iteration(algo, result["training_iteration"])
            losses = [module["total_loss"] for module in result["learners"].values()
                      if isinstance(module, dict) and "total_loss" in module]  # each module's
            recent.append((time.perf_counter(),
                           result["learners"]["__all_modules__"]["num_env_steps_trained"]))
            if "env_runners" in result.get("evaluation", {}):
                last_return = result["evaluation"]["env_runners"]["episode_return_mean"]
            bar.update()
            bar.set_postfix(loss=f"{sum(losses) / len(losses):.4f}",
                            eval_return="-" if math.isnan(last_return) else f"{last_return:.1f}",
                            steps_per_s=f"{_throughput(recent):,.0f}")
            if last_return >= stop.get("return", math.inf):
                reached = time.perf_counter() - started
                break
            if (algo.num_env_steps_trained_lifetime >= stop.get("env_steps", math.inf)
                    or time.perf_counter() - started >= stop.get("seconds", math.inf)):
                break
        checkpoint = algo.save_to_path(output / "checkpoint")
    summary = {
        "iterations": algo.iteration,
        "env_steps_trained": algo.num_env_steps_trained_lifetime,
        "evaluation_return_mean": None if math.isnan(last_return) else last_return,
        "seconds": round(time.perf_counter() - started, 2),
        "checkpoint": checkpoint,
        "checkpoints": checkpoints.kept,
        "results": str(output / "progress.csv"),
    }
    if dropped:  # data skipped or dropped, by reason (a warning named them as found)
        summary["dropped"] = dropped
    if "return" in stop:
        summary["stop_return_reached"] = reached is not None
    print(json.dumps(summary))
    return 0 if "return" not in stop or reached is not None else 1


def _throughput(recent: deque[tuple[float, int]]) -> float:
    """Env steps per second over the recent iterations (0 until there are two)."""
    if len(recent) < 2:
        return 0.0
    steps = sum(count for _, count in list(recent)[1:])
    return steps / (recent[-1][0] - recent[0][0])


def _evaluate(args: argparse.Namespace) -> int:
    from offline_rl.algorithms.checkpoint import load_module, read_config
    from offline_rl.evaluation.action_wrappers import env_to_make
    from offline_rl.evaluation.env_evaluation import EnvEvaluator
    from offline_rl.evaluation.env_limits import evaluation_limits

    config = read_config(args.checkpoint)
    if config.sections.multi_agent.is_multi_agent:
        return _evaluate_modules(args, config)
    module = load_module(args.checkpoint)
    if args.ope is not None:
        return _estimate_off_policy(config, module, args.ope)
    environment = config.sections.environment
    if environment.env is None:
        raise ConfigError(f"{args.checkpoint} was trained without an env: nothing to play in; "
                          "estimate its value from logged data with --ope DATA")
    evaluator = EnvEvaluator(env_to_make(environment), environment.env_config,
                             num_envs=min(args.episodes, 8), seed=args.seed,
                             limits=evaluation_limits(config.sections))
    evaluator.adapt_to(getattr(module, "observation_space", None),
                       getattr(module, "action_space", None))
    result = evaluator.evaluate(module.compute_actions, args.episodes)
    evaluator.close()
    print(f"{environment.env}: return mean {result['episode_return_mean']:.1f} "
          f"(min {result['episode_return_min']:.1f}, max {result['episode_return_max']:.1f}) "
          f"over {result['num_episodes']} episodes")
    print(json.dumps(result))
    return 0


def _evaluate_modules(args: argparse.Namespace, config: Any) -> int:
    """``evaluate`` of a multi-agent checkpoint: its modules (a checkpoint folder each) play
    together in its multi-agent env."""
    from offline_rl.algorithms.checkpoint import load_module
    from offline_rl.algorithms.multi_agent_algorithm import play_modules
    from offline_rl.evaluation.multi_agent_env import make_multi_agent_env

    multi_agent, environment = config.sections.multi_agent, config.sections.environment
    untrained = [module for module in multi_agent.policies
                 if module not in multi_agent.trained_modules]
    if untrained or args.ope is not None or environment.env is None:
        raise ConfigError(
            f"{args.checkpoint} is a multi-agent checkpoint: evaluate plays its modules in its "
            "multi-agent env, which needs the env and every module trained (untrained: "
            f"{untrained}); --ope estimates single-agent policies only")
    modules = {module: load_module(Path(args.checkpoint) / module)
               for module in multi_agent.policies}
    envs = [make_multi_agent_env(environment.env, environment.env_config)
            for _ in range(min(args.episodes, 8))]
    try:
        result = play_modules(envs, modules, multi_agent.policy_mapping_fn, args.episodes,
                              seed=args.seed)
    finally:
        for env in envs:
            env.close()
    print(f"{environment.env}: return mean {result['episode_return_mean']:.1f} over "
          f"{result['num_episodes']} episodes; by module {result['module_episode_returns_mean']}")
    print(json.dumps(result))
    return 0


def _estimate_off_policy(config: Any, module: Any, data: str) -> int:
    import ray

    from offline_rl.algorithms.off_policy_evaluation import ESTIMATORS, OffPolicyEvaluation
    from offline_rl.algorithms.ray_start import start_ray

    methods = config.sections.evaluation.off_policy_estimation_methods or {
        name: {"type": name} for name in ESTIMATORS}
    config.evaluation(off_policy_estimation_methods=methods, evaluation_config={"input_": data})
    started = start_ray()
    try:
        environment = config.sections.environment
        spaces = (environment.observation_space, environment.action_space)
        estimates = OffPolicyEvaluation(config, spaces).estimate(module)
    finally:
        if started:
            ray.shutdown()
    for name, estimate in estimates.items():
        print(f"{name}: v_target {estimate['v_target']:.2f} (std {estimate['v_target_std']:.2f}"
              f" over episodes), logged v_behavior {estimate['v_behavior']:.2f}, "
              f"v_delta {estimate['v_delta']:+.2f}")
    print(json.dumps(estimates))
    return 0


def _make_dataset(args: argparse.Namespace) -> int:
    from offline_rl.datasets import make_dataset

    card = make_dataset(args.env, args.out, tier=args.tier, episodes=args.episodes,
                        seed=args.seed, write_episodes=args.episodes_format,
                        overwrite=args.overwrite)
    print(json.dumps(card))
    return 0


def _record(args: argparse.Namespace) -> int:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig
    from offline_rl.algorithms.checkpoint import load_module
    from offline_rl.algorithms.ray_start import start_ray
    from offline_rl.recording.recorder import Recorder, check_output

    config = AlgorithmConfig.from_yaml(args.config)
    if args.output is not None:
        config.offline_data(output=args.output)
    inputs = {"input_": config.sections.offline_data.input_,
              "evaluation_input": config.sections.evaluation.evaluation_config.get("input_")}
    check_output(config.recorder_config(), **inputs, overwrite=args.overwrite)  # before Ray
    policy = load_module(args.checkpoint)
    start_ray(verbose=args.verbose)
    with Recorder(config.recorder_config(), policy, **inputs,
                  overwrite=args.overwrite) as recorder:
        stats = recorder.record(args.episodes)
        stats["files"] = len(recorder.stop())
    print(json.dumps({**stats, "output": config.sections.offline_data.output}))
    return 0


def _convert(args: argparse.Namespace) -> int:
    from offline_rl.algorithms.ray_start import start_ray
    from offline_rl.recording.convert import sample_batches_to_episodes, tabular_to_episodes

    start_ray(verbose=args.verbose)
    convert = tabular_to_episodes if args.source == "tabular" else sample_batches_to_episodes
    summary = convert(args.input, args.output, incomplete=args.incomplete,
                      overwrite=args.overwrite)
    print(json.dumps({**summary, "files": len(summary["files"])}))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from offline_rl.inspection import inspect_dataset, plot_returns

    action_space = observation_space = None
    if args.env is not None:
        import gymnasium as gym

        with gym.make(args.env) as env:
            action_space, observation_space = env.action_space, env.observation_space
    report = inspect_dataset(args.path, action_space=action_space,
                             observation_space=observation_space)
    if args.plot is not None:
        plot_returns(report["returns"], str(args.plot), title=args.path)
    print(json.dumps({key: value for key, value in report.items() if key != "returns"}))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from offline_rl.monitoring import plot_learning_curves

    print(plot_learning_curves(args.run_dir, args.out))
    return 0


COMMANDS = {"train": _train, "evaluate": _evaluate, "datasets make": _make_dataset,
            "record": _record, "convert": _convert, "inspect": _inspect, "plot": _plot}

if __name__ == "__main__":
    sys.exit(main())
