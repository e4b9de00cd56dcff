"""Policy quality of each algorithm on the reference datasets, beside d3rlpy on the same files.

For each ``env:tier`` it records the dataset (``offline_rl.datasets.make_dataset``, fixed seed)
and trains every algorithm that suits the env's action space for ``--updates`` updates at
batch ``--batch``, per seed, then evaluates the greedy policy for ``--episodes`` episodes.
Each run prints one JSON line: the return, its normalized score (0: the env's random tier, 100:
its expert tier, both measured here), ms per update through the whole pipeline (Ray Data,
PreLearners, learner; after the first iteration, which also starts the pipeline and is timed
on its own) and, as the ceiling, ms per ``learner.update`` on an in-memory batch. d3rlpy's
ms per update is its ``fit()`` time over the updates. Both libraries' policies are evaluated from
the same start states: episode ``i`` of seed ``s`` is reset with ``s + i``, as our evaluation
does.
With ``--d3rlpy-python`` (a Python with d3rlpy installed: it is no dependency of ours) d3rlpy's
BC/IQL/TD3+BC/CQL/DiscreteCQL train on the same Parquet files with the same budget and batch, in
that Python. ``--cosine-actor-lr IQL`` trains IQL's policy with a learning rate that decays to 0
over the budget on a cosine, in both libraries (the IQL paper's setting; our
``offline_rl.core.schedules.cosine_schedule``, d3rlpy's ``CosineAnnealingLRFactory``).
``--normalize-observations IQL`` standardizes IQL's observations with the dataset's per-feature
mean and std, in both libraries (our ``model_config`` ``normalize_observations``, d3rlpy's
``StandardObservationScaler``). ``--out`` writes the table as Markdown, with the command line.

    python benchmarks/quality.py --tasks Pendulum-v1:mixed CartPole-v1:mixed --seeds 0 1 2 \\
        --updates 10000 --d3rlpy-python /tmp/d3venv/bin/python --out benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

#: Our algorithms, the action spaces each suits, and d3rlpy's counterpart per action space.
ALGORITHMS = {
    "BC": {"Discrete": "DiscreteBCConfig", "Box": "BCConfig"},
    "IQL": {"Box": "IQLConfig"},
    "TD3BC": {"Box": "TD3PlusBCConfig"},
    "CQL": {"Box": "CQLConfig"},
    "DiscreteCQL": {"Discrete": "DiscreteCQLConfig"},
    "MARWIL": {},
}
#: The action spaces where our algorithm runs though d3rlpy has no counterpart.
OURS_ONLY = {"IQL": ("Discrete",), "MARWIL": ("Discrete", "Box")}
#: Trained with d3rlpy's BC network and learning rate ([256, 256] ReLU, 1e-3) in place of
#: RLlib's defaults (tanh, 1e-4, too slow for the budget): MARWIL with ``beta=0`` is BC, so both
#: get the same settings and ``beta`` is the only difference.
IMITATION_SETTINGS_FOR = ("BC", "MARWIL")
REFERENCE_EPISODES = 20
UPDATES_PER_ITERATION = 500
CEILING_UPDATES = 100

D3RLPY_CHILD = """
import json, sys, time
import d3rlpy, gymnasium as gym, numpy as np, pyarrow.parquet as pq
from pathlib import Path
run = json.loads(sys.argv[1])
updates, seed = run["updates"], run["seed"]
table = pq.read_table(sorted(Path(run["data"]).rglob("*.parquet")))
column = lambda field: np.asarray(table.column(field).to_pylist())
env = gym.make(run["env_id"])
discrete = isinstance(env.action_space, gym.spaces.Discrete)
dataset = d3rlpy.dataset.MDPDataset(
    observations=column("obs").astype(np.float32),
    actions=column("actions") if discrete else column("actions").astype(np.float32),
    rewards=column("rewards").astype(np.float32), terminals=column("terminateds"),
    timeouts=column("truncateds") & ~column("terminateds"))  # d3rlpy: a step is one or the other
d3rlpy.seed(seed)
kwargs = {"batch_size": run["batch"]}
if not discrete:
    kwargs["action_scaler"] = d3rlpy.preprocessing.MinMaxActionScaler()
if run["cosine_actor_lr"]:
    kwargs["actor_optim_factory"] = d3rlpy.optimizers.AdamFactory(
        lr_scheduler_factory=d3rlpy.optimizers.CosineAnnealingLRFactory(T_max=updates))
if run["normalize_observations"]:
    kwargs["observation_scaler"] = d3rlpy.preprocessing.StandardObservationScaler()
algo = getattr(d3rlpy.algos, run["name"])(**kwargs).create(device="cpu:0")
started = time.perf_counter()
algo.fit(dataset, n_steps=updates, n_steps_per_epoch=updates, show_progress=False,
         logger_adapter=d3rlpy.logging.NoopAdapterFactory(), save_interval=10**9)
seconds = time.perf_counter() - started
returns = []
for episode in range(run["episodes"]):  # the start states of ours: episode i reset with seed + i
    obs, _ = env.reset(seed=seed + episode)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(algo.predict(obs[None])[0])
        total, done = total + float(reward), terminated or truncated
    returns.append(total)
print(json.dumps({"return": float(np.mean(returns)), "ms_per_update": 1000 * seconds / updates}))
"""


def action_kind(env_id: str) -> str:
    return type(gym.make(env_id).action_space).__name__


def dataset(env_id: str, tier: str, root: Path, episodes: int) -> Path:
    """The tier's dataset under ``root``, recorded once per generator version (seed 0) into a
    folder of its own: an older version's folder is left as it is, never deleted."""
    from offline_rl.datasets import make_dataset
    from offline_rl.datasets.generate import CARD_FILE, GENERATOR_VERSION

    path = root / f"{env_id}-{tier}-{episodes}-v{GENERATOR_VERSION}"
    if not (path / CARD_FILE).exists():
        make_dataset(env_id, path, tier=tier, episodes=episodes, seed=0, progress=False)
    return path


def reference_returns(env_id: str, root: Path) -> tuple[float, float]:
    """The mean returns of the env's random and expert tiers (the 0 and 100 of the score)."""
    cards = [json.loads((dataset(env_id, tier, root, REFERENCE_EPISODES) / "dataset.json")
                        .read_text()) for tier in ("random", "expert")]
    return cards[0]["episode_return_mean"], cards[1]["episode_return_mean"]


def ours(name: str, data: Path, env_id: str, args: argparse.Namespace, seed: int) -> dict:
    """Trains and evaluates our ``name``; returns the figures."""
    import offline_rl
    from offline_rl.core.schedules import cosine_schedule

    config_class = getattr(offline_rl, f"{name}Config")
    config = (config_class().environment(env_id)
              .training(train_batch_size_per_learner=args.batch)
              .offline_data(input_=str(data), dataset_num_iters_per_learner=UPDATES_PER_ITERATION)
              .evaluation(evaluation_duration=args.episodes).debugging(seed=seed))
    if name in IMITATION_SETTINGS_FOR:
        config = config.training(lr=1e-3).rl_module(
            model_config={"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"})
    if name in args.cosine_actor_lr:
        config = config.training(actor_lr=cosine_schedule(
            config.actor_lr, budget(name, args) * args.batch))
    if name in args.normalize_observations:
        config = config.rl_module(model_config={"normalize_observations": True})
    wall_started = time.perf_counter()
    with config.build() as algo:
        started = time.perf_counter()
        algo.train()  # the first iteration also starts the pipeline: timed on its own
        first = time.perf_counter()
        updates = budget(name, args)
        for _ in range(updates // UPDATES_PER_ITERATION - 1):
            algo.train()
        steady_ms = 1000 * (time.perf_counter() - first) / max(
            updates - UPDATES_PER_ITERATION, 1)
        returned = algo.evaluate()["env_runners"]["episode_return_mean"]
        wall = time.perf_counter() - wall_started
        ceiling = learner_update_ms(algo, args.batch)
    return {"return": returned, "ms_per_update": steady_ms, "learner_update_ms": ceiling,
            "first_iteration_s": first - started, "wall_s": wall}


def budget(name: str, args: argparse.Namespace) -> int:
    """The updates ``name`` trains for: ``--updates``, unless ``--budget`` overrides it."""
    overrides = dict(item.split("=") for item in args.budget)
    return int(overrides.get(name, args.updates))


def learner_update_ms(algo, batch_size: int) -> float:
    """The ceiling: ms per ``learner.update`` of the algorithm's own learner class, on one
    in-memory batch (no Ray, no data pipeline)."""
    batch = algo.offline_data.sample(batch_size)
    spec = algo.config.get_rl_module_spec(algo.observation_space, algo.action_space)
    learner = algo.config.get_default_learner_class()(algo.config.learner_config(spec))
    learner.update(batch)
    started = time.perf_counter()
    for _ in range(CEILING_UPDATES):
        learner.update(batch)
    return 1000 * (time.perf_counter() - started) / CEILING_UPDATES


def theirs(name: str, counterpart: str, data: Path, env_id: str, args: argparse.Namespace,
           seed: int) -> dict:
    """Trains and evaluates d3rlpy's ``counterpart`` of our ``name`` in ``--d3rlpy-python``;
    returns the figures."""
    started = time.perf_counter()
    run = {"data": str(data), "env_id": env_id, "name": counterpart,
           "updates": budget(name, args), "batch": args.batch, "seed": seed,
           "episodes": args.episodes, "cosine_actor_lr": name in args.cosine_actor_lr,
           "normalize_observations": name in args.normalize_observations}
    child = subprocess.run([args.d3rlpy_python, "-c", D3RLPY_CHILD, json.dumps(run)],
                           capture_output=True, text=True)
    if child.returncode != 0:
        raise RuntimeError(f"d3rlpy's {counterpart} on {data} (seed {seed}) failed; its "
                           f"error:\n{child.stderr[-2000:]}")
    return {**json.loads(child.stdout.strip().splitlines()[-1]),
            "wall_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["Pendulum-v1:mixed"], metavar="ENV:TIER")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--updates", type=int, default=10_000)
    parser.add_argument("--budget", nargs="*", default=[], metavar="ALGORITHM=UPDATES",
                        help="another update budget for some algorithms (both libraries)")
    parser.add_argument("--cosine-actor-lr", nargs="*", default=[], metavar="ALGORITHM",
                        choices=["IQL", "CQL", "TD3BC"],
                        help="decay these algorithms' policy learning rate to 0 over the "
                             "budget on a cosine (both libraries; the IQL paper's setting)")
    parser.add_argument("--normalize-observations", nargs="*", default=[], metavar="ALGORITHM",
                        choices=list(ALGORITHMS),
                        help="standardize these algorithms' observations with the dataset's "
                             "per-feature mean and std (both libraries)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--dataset-episodes", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes")
    parser.add_argument("--data", type=Path, default=Path("data/quality"))
    parser.add_argument("--d3rlpy-python", default=None, metavar="PYTHON")
    parser.add_argument("--out", type=Path, default=None, metavar="RESULTS.md")
    args = parser.parse_args()
    from offline_rl.algorithms.ray_start import start_ray

    start_ray()
    rows = []
    for task in args.tasks:
        env_id, tier = task.split(":")
        data = dataset(env_id, tier, args.data, args.dataset_episodes)
        random_return, expert_return = reference_returns(env_id, args.data)
        kind = action_kind(env_id)
        for name in args.algorithms:
            counterpart = ALGORITHMS[name].get(kind)
            if counterpart is None and kind not in OURS_ONLY.get(name, ()):
                continue
            runs = {"offline-rl": [ours(name, data, env_id, args, seed) for seed in args.seeds]}
            if args.d3rlpy_python and counterpart:
                runs["d3rlpy"] = [theirs(name, counterpart, data, env_id, args, seed)
                                  for seed in args.seeds]
            for library, results in runs.items():
                returns = [result["return"] for result in results]
                row = {"task": task, "algorithm": name, "library": library,
                       "return_mean": statistics.mean(returns),
                       "return_std": statistics.pstdev(returns), "returns": returns,
                       "normalized": 100 * (statistics.mean(returns) - random_return)
                       / (expert_return - random_return),
                       "ms_per_update_median": statistics.median(
                           result["ms_per_update"] for result in results),
                       "wall_s_median": statistics.median(result["wall_s"] for result in results),
                       "seeds": args.seeds, "updates": budget(name, args), "batch": args.batch}
                if library == "offline-rl":
                    for key in ("learner_update_ms", "first_iteration_s"):
                        row[f"{key}_median"] = statistics.median(
                            result[key] for result in results)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:  # after every row, so a stopped run keeps what it measured
                    write_table(rows, args.out)


def write_table(rows: list[dict], out: Path) -> None:
    lines = ["# Policy quality on the reference datasets", "",
             "Generated by:", "", "    python " + " ".join(map(shlex.quote, sys.argv)), "",
             "| task | algorithm | library | updates | return (mean ± std) | normalized | "
             "ms/update (pipeline) | ms/update (learner only) | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        learner = row.get("learner_update_ms_median")
        lines.append(f"| {row['task']} | {row['algorithm']} | {row['library']} | "
                     f"{row['updates']} | {row['return_mean']:.1f} ± {row['return_std']:.1f} | "
                     f"{row['normalized']:.0f} | {row['ms_per_update_median']:.2f} | "
                     f"{'-' if learner is None else f'{learner:.2f}'} | "
                     f"{row['wall_s_median']:.0f} |")
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
