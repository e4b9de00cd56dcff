"""The ``offline-rl`` command line's argument types, parser and error messages: every failure
ends with ``offline-rl: error: <what, where, how to fix>`` and exit status 2.

Examples:
    >>> positive = count(1)
    >>> positive("3")
    3
    >>> positive("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 0 is below 1; give at least 1
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from offline_rl.algorithms.registry import registered_algorithms
from offline_rl.reference_datasets import EXPERT_ENVS, MULTI_AGENT_ENVS, TIERS

#: The top-level ``--help``.
DESCRIPTION = """\
Train reinforcement-learning policies from logged experience (Parquet, read with Ray Data).

  offline-rl datasets make CartPole-v1 expert --out data/cartpole-expert  # record a dataset
  offline-rl train configs/bc_cartpole.yaml --stop-return 450       # train BC on it
  offline-rl evaluate runs/<run>/checkpoint --episodes 20            # play the trained policy
  offline-rl evaluate runs/<run>/checkpoint --ope data/held-out      # or estimate it, no env
  offline-rl plot runs/<run>                                         # draw its learning curves

Set RAY_ADDRESS to train on an existing Ray cluster; otherwise a local Ray instance is started.
"""


def import_modules(names: list[str]) -> None:
    """``--import``: the user's own modules (their PreLearner, module or env classes), imported
    on their word so that a config may name classes in them; offline-rl never imports what a
    file names."""
    import importlib

    from offline_rl.errors import ConfigError

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(f"--import {name}: {error}; is it installed, or on PYTHONPATH?"
                              ) from None


def describe(error: Exception) -> str:
    """The message of a failed command: ours as raised; a file system error with its path
    and reason; anything else with its type and where to see more."""
    from offline_rl.errors import find_error

    ours = find_error(error)
    if ours is not None:
        return ours.message or str(ours)
    if type(error).__module__.startswith("gymnasium"):  # e.g. an env id that is not registered
        return (f"{type(error).__name__}: {str(error).rstrip('.')}; check the env id (gymnasium."
                "pprint_registry() lists the registered ones)")
    if isinstance(error, OSError):
        if error.filename is None:  # a message of its own, naming the path
            return str(error)
        return (f"{error.filename}: {error.strerror or error}; check that the path exists and "
                "that you may read (or, for an output, write) it")
    return (f"{type(error).__name__}: {error} (unexpected: rerun with --verbose for the "
            "traceback, and report it if the message does not say what to change)")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors end with ``offline-rl: error:`` in every
    subcommand too (argparse would name the subcommand's program), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"offline-rl: error: {message}\n")


def count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}; give at least "
                                             f"{minimum}")
        return value

    parse.__name__ = "count"  # argparse names the type in its "invalid <type> value" message
    return parse


def finite(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def config_file(text: str) -> Path:
    """An argparse type: an existing regular file (a YAML config)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"config file {text!r} does not exist; see configs/ "
                                         "for examples")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"config {text!r} is not a file (a folder?); name the "
                                         "YAML file itself")
    return path


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object (RLlib's ``--config``/``--stop``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({error}); quote it as "
                                         "'{\"key\": value}'") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object ({{...}})")
    return value


def folder(what: str) -> Callable[[str], Path]:
    """An argparse type: an existing folder, ``what`` it should be (for the message)."""

    def parse(text: str) -> Path:
        path = Path(text)
        if not path.exists():
            raise argparse.ArgumentTypeError(f"{text!r} does not exist; name {what}")
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a file; name {what}")
        return path

    parse.__name__ = "folder"
    return parse


def output_file(text: str) -> Path:
    """An argparse type: a file to write (its folder must exist; not itself a folder)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; name the file to write "
                                         "(e.g. FOLDER/curves.png)")
    if not path.absolute().parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder of {text!r} does not exist; create it "
                                         "first")
    return path


def build_parser() -> argparse.ArgumentParser:
    """The ``offline-rl`` parser: each command sets ``command`` to its name. It lists the
    registered algorithms and the reference datasets without importing them, so that
    ``--help`` is quick.

    Examples:
        >>> args = build_parser().parse_args(["datasets", "make", "Pendulum-v1", "mixed",
        ...                                   "--out", "data/pendulum-mixed"])
        >>> args.command, args.env, args.tier, args.episodes
        ('datasets make', 'Pendulum-v1', 'mixed', 100)
    """
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
    train.add_argument("config", type=config_file, nargs="?", default=None,
                       help="YAML config file (or RLlib's form: --run, --env, --config, --stop)")
    train.add_argument("--run", default=None, metavar="ALGO",
                       help="the algorithm to train without a YAML file, as `rllib train --run`")
    train.add_argument("--env", default=None, metavar="ENV", help="gymnasium env id")
    train.add_argument("--config", dest="config_json", type=json_object, default=None,
                       metavar="JSON", help="config keys as JSON, RLlib's flat keys (old-stack "
                       "ones too, each translated with a warning naming the new keys) or "
                       "sections; over the YAML file's when both are given")
    train.add_argument("--stop", type=json_object, default=None, metavar="JSON",
                       help="RLlib's stop criteria: training_iteration, timesteps_total (env "
                            "steps trained), time_total_s, or an evaluation return "
                            "(episode_reward_mean, env_runners/episode_return_mean, ...)")
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
    train.set_defaults(command="train")

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
    evaluate.set_defaults(command="evaluate")

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
    make.add_argument("env", choices=[*EXPERT_ENVS, *MULTI_AGENT_ENVS], metavar="env",
                      help=f"gymnasium env id: {', '.join(EXPERT_ENVS)}; or a multi-agent env "
                           f"whose agents each play the expert, recorded as rows naming their "
                           f"agent: {', '.join(MULTI_AGENT_ENVS)}")
    make.add_argument("tier", choices=TIERS, help="behaviour policy quality")
    make.add_argument("--out", type=Path, required=True, help="output folder")
    make.add_argument("--episodes", type=count(1), default=100, help="episodes to record")
    make.add_argument("--seed", type=count(0), default=0, help="random seed")
    make.add_argument("--episodes-format", action="store_true",
                      help="write the episodes format (msgpack 'item' column) instead of tabular")
    make.add_argument("--overwrite", action="store_true",
                      help="write into a folder that holds other files (kept as they are), "
                           "replacing the dataset offline-rl wrote there before")
    make.set_defaults(command="datasets make")

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
    record.set_defaults(command="record")

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
    convert.set_defaults(command="convert")

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
    inspect.set_defaults(command="inspect")

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
    plot.set_defaults(command="plot")
    return parser
