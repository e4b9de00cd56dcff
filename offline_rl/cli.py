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

from offline_rl.algorithms.registry import registered_algorithms
from offline_rl.cli_arguments import (
    Parser,
    config_file,
    count,
    describe,
    finite,
    folder,
    import_modules,
    output_file,
)
from offline_rl.errors import ConfigError, OutputError

DESCRIPTION = """\
Train reinforcement-learning policies from logged experience (Parquet, read with Ray Data).

  offline-rl datasets make CartPole-v1 expert --out data/cartpole-expert  # record a dataset
  offline-rl train configs/bc_cartpole.yaml --stop-return 450       # train BC on it
  offline-rl evaluate runs/<run>/checkpoint --episodes 20            # play the trained policy
  offline-rl evaluate runs/<run>/checkpoint --ope data/held-out      # or estimate it, no env
  offline-rl plot runs/<run>                                         # draw its learning curves

Set RAY_ADDRESS to train on an existing Ray cluster; otherwise a local Ray instance is started.
"""
#: Envs with reference-dataset experts, and the tiers (kept here so --help needs no imports).
EXPERT_ENVS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1")
TIER_NAMES = ("random", "medium", "expert", "mixed")
#: Iterations the progress bar's env steps/s is averaged over.
THROUGHPUT_WINDOW = 20


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``offline-rl`` console script; returns the exit status.

    Every failure ends the command with exit status 2 and ``offline-rl: error: <message>`` as
    the last line on stderr: a bad argument (argparse's message), an error about the data,
    config or cluster (ours, which names the place and the fix), a file that cannot be read or
    written (its path and the reason); ``--verbose`` prints the traceback (Ray's included)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a bad argument (2, message already printed)
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        import_modules(args.imports)
        return args.command(args)
    except Exception as error:
        if args.verbose:
            traceback.print_exception(error)
        print(f"offline-rl: error: {describe(error)}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="offline-rl", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = Parser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true",
                        help="on errors, print the whole traceback (Ray's included)")
    common.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE", help="import MODULE first, so that a config or "
                        "checkpoint may name its classes (offline-rl never imports what a file "
                        "names); repeat for several")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train", parents=[common],
        help="train an algorithm from a YAML config",
        description="Train from a YAML config (its algorithm: one of "
                    f"{', '.join(registered_algorithms())}; sections: environment, training, "
                    "learners, offline_data, evaluation, checkpointing, rl_module, debugging; "
                    "see configs/). Writes progress.csv and result.json (one row/line per "
                    "iteration, ready to plot) and the final checkpoint to the output folder; "
                    "with --checkpoint-frequency K also checkpoint_<iteration> every K "
                    "iterations, so that a run stopped midway keeps its progress (evaluate "
                    "and Algorithm.from_checkpoint take any of them).")
    train.add_argument("config", type=config_file, help="YAML config file")
    train.add_argument("--stop-return", type=finite, default=None, metavar="R",
                       help="stop once the evaluation return mean reaches R")
    train.add_argument("--max-iterations", type=count(1), default=1000, metavar="N",
                       help="stop after N training iterations (default: 1000)")
    train.add_argument("--output-dir", type=Path, default=None, metavar="DIR",
                       help="where results and checkpoints go (default: runs/<algo>-<time>)")
    train.add_argument("--checkpoint-frequency", type=count(0), default=None, metavar="K",
                       help="also write DIR/checkpoint_<iteration> every K iterations (default: "
                            "the config's checkpointing.checkpoint_frequency, whose default 0 "
                            "writes only the final checkpoint)")
    train.add_argument("--keep-checkpoints", type=count(1), default=None, metavar="M",
                       help="keep only the newest M of those periodic checkpoints, deleting an "
                            "older one once a newer one is completely written (default: the "
                            "config's checkpointing.keep_checkpoints_num; unset: keep all)")
    train.add_argument("--resume", type=folder("the run folder train wrote"), default=None,
                       metavar="RUN_DIR",
                       help="continue the run in RUN_DIR from its newest checkpoint (weights, "
                            "optimizer state, counters, random generators and, with a local "
                            "learner, its place in the data) up to --max-iterations in all, "
                            "appending to its result files and curves; results written after "
                            "that checkpoint are replaced")
    train.add_argument("--overwrite", action="store_true",
                       help="train into an --output-dir that holds an earlier run's results, "
                            "replacing them (other files there are kept)")
    train.set_defaults(command=_train)

    evaluate = commands.add_parser(
        "evaluate", parents=[common],
        help="play a checkpoint's policy in its env, or estimate its value from logged data",
        description="Run a trained policy greedily in the env it was trained for and print the "
                    "episode returns (no Ray needed); or, with --ope DATA, estimate its "
                    "discounted return from episodes another policy logged (with action_logp "
                    "or action_prob), with no env at all: the config's "
                    "off_policy_estimation_methods, or importance sampling, weighted importance "
                    "sampling, the direct method and doubly robust.",
        epilog="example: offline-rl evaluate runs/bc/checkpoint --ope data/held-out")
    evaluate.add_argument("checkpoint", type=folder("a checkpoint folder train wrote"),
                          help="checkpoint folder written by train")
    evaluate.add_argument("--episodes", type=count(1), default=10, help="episodes to play")
    evaluate.add_argument("--seed", type=count(0), default=1000,
                          help="seed of the first episode")
    evaluate.add_argument("--ope", metavar="DATA", default=None,
                          help="logged data to estimate on instead of playing (read as the "
                               "config's offline_data reads its input)")
    evaluate.set_defaults(command=_evaluate)

    datasets = commands.add_parser("datasets", help="reference datasets from scripted experts")
    dataset_commands = datasets.add_subparsers(title="commands", required=True, metavar="COMMAND")
    make = dataset_commands.add_parser(
        "make", parents=[common],
        help="record a reference dataset (env x tier)",
        description="Record a scripted behaviour policy in a gymnasium env, D4RL-style: tier "
                    "'random', 'medium', 'expert' or 'mixed' (one of the three per episode); a "
                    "discrete 'medium' is the expert with a systematic flaw. "
                    "Writes Parquet in RLlib's layout with the behaviour policy's action_logp "
                    "and a dataset.json card. Deterministic given --seed. The output folder "
                    "must be new or empty unless --overwrite.")
    make.add_argument("env", choices=EXPERT_ENVS, metavar="env",
                      help=f"gymnasium env id: {', '.join(EXPERT_ENVS)}")
    make.add_argument("tier", choices=TIER_NAMES, help="behaviour policy quality")
    make.add_argument("--out", type=Path, required=True, help="output folder")
    make.add_argument("--episodes", type=count(1), default=100, help="episodes to record")
    make.add_argument("--seed", type=count(0), default=0, help="random seed")
    make.add_argument("--episodes-format", action="store_true",
                      help="write the episodes format (msgpack 'item' column) instead of tabular")
    make.add_argument("--overwrite", action="store_true",
                      help="write into a folder that holds other files (kept as they are), "
                           "replacing the dataset offline-rl wrote there before")
    make.set_defaults(command=_make_dataset)

    record = commands.add_parser(
        "record", parents=[common],
        help="record a trained policy (or checkpoint) to Parquet with Ray actors",
        description="Play a checkpoint's policy (sampling its action distribution) in the "
                    "config's env across env_runners.num_env_runners Ray actors and write the "
                    "complete episodes with the config's offline_data output options. Each "
                    "run adds files with its own run id, so recording again into a folder "
                    "keeps the earlier episodes; a folder holding files offline-rl did not "
                    "write needs --overwrite (they are kept), and the config's input_ is "
                    "refused as output.")
    record.add_argument("config", type=config_file,
                        help="YAML config (env, env_runners, output*)")
    record.add_argument("checkpoint", type=folder("a checkpoint folder train wrote"),
                        help="checkpoint folder written by train")
    record.add_argument("--episodes", type=count(1), default=100, help="episodes to record")
    record.add_argument("--output", default=None, help="override offline_data.output")
    record.add_argument("--overwrite", action="store_true",
                        help="record into a folder that holds files offline-rl did not write "
                             "(they are kept as they are)")
    record.set_defaults(command=_record)

    convert = commands.add_parser(
        "convert", parents=[common],
        help="convert tabular Parquet or legacy JSON to the episodes format",
        description="Group tabular rows by eps_id (ordered by t) or split legacy SampleBatch "
                    "JSON lines into episodes, with Ray Data, and write the episodes format. "
                    "The output folder must be new or empty unless --overwrite.")
    convert.add_argument("input", help="input folder, file or glob")
    convert.add_argument("output", help="output folder")
    convert.add_argument("--from", dest="source", choices=["tabular", "json"],
                         default="tabular", help="input format (default: tabular)")
    convert.add_argument("--incomplete", choices=["keep", "drop", "error"], default="keep",
                         help="episodes that never end (a recording stopped mid-episode): keep "
                              "them as unfinished chunks, as RLlib does (default), drop them, "
                              "or fail; the summary counts them")
    convert.add_argument("--overwrite", action="store_true",
                         help="write into a folder that holds other files (kept as they are), "
                              "replacing the conversion offline-rl wrote there before")
    convert.set_defaults(command=_convert)

    inspect = commands.add_parser(
        "inspect", parents=[common],
        help="format, schema, episodes, steps and return statistics of a dataset",
        description="Detect a dataset's format and print its schema, episode and step counts, "
                    "return statistics and actions outside a Box action space as JSON; --plot "
                    "writes a returns histogram (PNG).")
    inspect.add_argument("path", help="dataset folder or file")
    inspect.add_argument("--plot", type=output_file, default=None, metavar="FILE.png",
                         help="write a histogram of episode returns")
    inspect.add_argument("--env", default=None, metavar="ENV_ID",
                         help="gymnasium env whose Box action space actions are counted "
                              "against (actions_out_of_bounds; episodes carry their own)")
    inspect.set_defaults(command=_inspect)

    plot = commands.add_parser(
        "plot", parents=[common],
        help="draw a training run's learning curves (PNG)",
        description="Draw the learning curves of a folder offline-rl train wrote (its "
                    "result.json): loss terms (held-out ones dashed), evaluation return, "
                    "off-policy estimates with error bars, and env steps trained per second.",
        epilog="example: offline-rl plot runs/bc  (writes runs/bc/learning_curves.png)")
    plot.add_argument("run_dir", type=folder("the folder offline-rl train wrote"),
                      help="folder written by offline-rl train")
    plot.add_argument("--out", type=output_file, default=None, metavar="FILE.png",
                      help="where to write the PNG (default: RUN_DIR/learning_curves.png)")
    plot.set_defaults(command=_plot)
    return parser


def _train(args: argparse.Namespace) -> int:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig

    config = AlgorithmConfig.from_yaml(args.config)  # a bad config fails before Ray's imports

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
    if args.stop_return is not None and config.evaluation_interval is None:
        raise ConfigError("--stop-return needs evaluation: set evaluation.evaluation_interval "
                          f"in {args.config}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    output = args.resume or args.output_dir or Path("runs") / f"{config.algo_name}-{stamp}"
    if output.exists() and not output.is_dir():
        raise OutputError(f"output folder {output} is a file; name a folder with --output-dir")
    replaced = [name for name in (PROGRESS_FILE, RESULT_FILE) if (output / name).exists()]
    if replaced and not args.resume and not args.overwrite:
        raise OutputError(f"--output-dir {output} already holds {' and '.join(replaced)} (an "
                          "earlier run's results?) and training would replace them: continue "
                          f"that run with --resume {output}, choose another --output-dir, or "
                          "pass --overwrite to replace them")
    check_checkpoint_path(output / "checkpoint")  # before training, not after it
    resumed_from = newest_checkpoint(args.resume) if args.resume else None
    checkpoints = PeriodicCheckpoints(output, frequency=config.checkpoint_frequency,
                                      keep=config.keep_checkpoints_num)
    output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.verbose:  # otherwise build() starts Ray, quietly, once it has checked the data
        start_ray(verbose=True)
    algo = (Algorithm.from_checkpoint(resumed_from, config) if resumed_from
            else config.build())
    reached = None
    with (algo, ResultLog(output, resume_after=algo.iteration if resumed_from else None)
          as writer, tqdm(total=args.max_iterations, initial=algo.iteration, unit="iter",
                          desc=f"training {config.algo_name}") as bar):
        last_return = float("nan")
        recent = deque(maxlen=THROUGHPUT_WINDOW)
        for _ in range(args.max_iterations - algo.iteration):
            result = algo.train()
            writer.write(result)
            checkpoints.after_iteration(algo, result["training_iteration"])
            learner = result["learners"]["default_policy"]
            recent.append((time.perf_counter(),
                           result["learners"]["__all_modules__"]["num_env_steps_trained"]))
            if "env_runners" in result.get("evaluation", {}):
                last_return = result["evaluation"]["env_runners"]["episode_return_mean"]
            bar.update()
            bar.set_postfix(loss=f"{learner['total_loss']:.4f}",
                            eval_return="-" if math.isnan(last_return) else f"{last_return:.1f}",
                            steps_per_s=f"{_throughput(recent):,.0f}")
            if args.stop_return is not None and last_return >= args.stop_return:
                reached = time.perf_counter() - started
                break
        checkpoint = algo.save_to_path(output / "checkpoint")
    summary = {
        "iterations": algo.iteration,
        "env_steps_trained": algo.num_env_steps_trained_lifetime,
        "evaluation_return_mean": last_return,
        "seconds": round(time.perf_counter() - started, 2),
        "checkpoint": checkpoint,
        "checkpoints": checkpoints.kept,
        "results": str(output / "progress.csv"),
    }
    if args.stop_return is not None:
        summary["stop_return_reached"] = reached is not None
    print(json.dumps(summary))
    return 0 if args.stop_return is None or reached is not None else 1


def _throughput(recent: deque[tuple[float, int]]) -> float:
    """Env steps per second over the recent iterations (0 until there are two)."""
    if len(recent) < 2:
        return 0.0
    steps = sum(count for _, count in list(recent)[1:])
    return steps / (recent[-1][0] - recent[0][0])


def _evaluate(args: argparse.Namespace) -> int:
    from offline_rl.algorithms.checkpoint import load_module, read_config
    from offline_rl.evaluation.env_evaluation import EnvEvaluator

    config = read_config(args.checkpoint)
    module = load_module(args.checkpoint)
    if args.ope is not None:
        return _estimate_off_policy(config, module, args.ope)
    if config.env is None:
        raise ConfigError(f"{args.checkpoint} was trained without an env: nothing to play in; "
                          "estimate its value from logged data with --ope DATA")
    evaluator = EnvEvaluator(config.env, config.env_config, num_envs=min(args.episodes, 8),
                             seed=args.seed)
    result = evaluator.evaluate(module.compute_actions, args.episodes)
    evaluator.close()
    print(f"{config.env}: return mean {result['episode_return_mean']:.1f} "
          f"(min {result['episode_return_min']:.1f}, max {result['episode_return_max']:.1f}) "
          f"over {result['num_episodes']} episodes")
    print(json.dumps(result))
    return 0


def _estimate_off_policy(config: Any, module: Any, data: str) -> int:
    import ray

    from offline_rl.algorithms.off_policy_evaluation import ESTIMATORS, OffPolicyEvaluation
    from offline_rl.algorithms.ray_start import start_ray

    methods = config.off_policy_estimation_methods or {
        name: {"type": name} for name in ESTIMATORS}
    config.evaluation(off_policy_estimation_methods=methods, evaluation_config={"input_": data})
    started = start_ray()
    try:
        spaces = (config.observation_space, config.action_space)
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
    from offline_rl.recording.recorder import Recorder

    config = AlgorithmConfig.from_yaml(args.config)
    if args.output is not None:
        config.offline_data(output=args.output)
    policy = load_module(args.checkpoint)
    start_ray(verbose=args.verbose)
    with Recorder(config.recorder_config(), policy, input_=config.input_,
                  overwrite=args.overwrite) as recorder:
        stats = recorder.record(args.episodes)
        stats["files"] = len(recorder.stop())
    print(json.dumps({**stats, "output": config.output}))
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


if __name__ == "__main__":
    sys.exit(main())
