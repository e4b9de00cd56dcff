"""Cold start: seconds from a fresh ``python`` process to a BC policy with an evaluation return
of 450 on CartPole, phase by phase, beside the ceilings measured in the same run.

Each run records a new 100k-row CartPole dataset (scripted expert, a new seed: files no run has
read), then times, each in a fresh process:

- ours: ``from offline_rl import BCConfig``, ``build()`` (which starts Ray), ``train()`` until
  the evaluation return (5 episodes every 5 iterations, one update of batch 1024 each) reaches
  450. Phases: imports, ``ray.init``, build, first batch, first update, return >= 450, each in
  seconds since the process was spawned (``ray_init_s`` is its own duration);
- ceilings: a bare ``ray.init``, and plain Ray Data (``ray.init``, ``read_parquet`` ->
  ``map_batches`` on a one-actor pool -> first batch), and, in this process, a bare torch
  update of the same network;
- with ``--d3rlpy-python`` (a Python with d3rlpy: no dependency of ours), d3rlpy's
  ``DiscreteBC`` on the same Parquet file, in memory, the same batch, learning rate, network
  and evaluation schedule.

Prints one JSON line: each figure's min and median over the runs.

    python benchmarks/cold_start.py [--runs 3] [--d3rlpy-python /tmp/d3venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bc_cartpole import bare_torch_update_ms

EPISODES = 200  # x 500 steps: 100k rows
BATCH, LR, HIDDENS = 1024, 3e-3, [256, 256]
EVALUATION_INTERVAL, EVALUATION_EPISODES, TARGET_RETURN, MAX_ITERATIONS = 5, 5, 450, 500

OURS = f"""
import json, sys, time
spawned = float(sys.argv[1])
since = lambda: time.time() - spawned
marks = {{}}
from offline_rl import BCConfig
marks["imports_s"] = since()
import offline_rl.algorithms.ray_start as ray_start
import offline_rl.data.pipeline.offline_data as offline_data
init_ray, sample = ray_start._init_ray, offline_data.OfflineData.sample
def timed_init_ray(verbose):
    started = time.time()
    try:
        return init_ray(verbose)
    finally:
        marks["ray_init_s"] = time.time() - started
def timed_sample(self, *args, **kwargs):
    batch = sample(self, *args, **kwargs)
    marks.setdefault("first_batch_s", since())
    return batch
ray_start._init_ray, offline_data.OfflineData.sample = timed_init_ray, timed_sample
config = (BCConfig().environment("CartPole-v1")
          .training(lr={LR}, train_batch_size_per_learner={BATCH})
          .offline_data(input_=sys.argv[2], dataset_num_iters_per_learner=1)
          .evaluation(evaluation_interval={EVALUATION_INTERVAL},
                      evaluation_duration={EVALUATION_EPISODES})
          .rl_module(model_config={{"fcnet_hiddens": {HIDDENS}}}).debugging(seed=0))
algo = config.build()
marks["build_s"] = since()
for iteration in range({MAX_ITERATIONS}):
    result = algo.train()
    marks.setdefault("first_update_s", since())
    score = result.get("evaluation", {{}}).get("env_runners", {{}}).get("episode_return_mean")
    if score is not None and score >= {TARGET_RETURN}:
        marks["to_return_450_s"] = since()
        marks["iterations"] = iteration + 1
        break
algo.stop()
print(json.dumps(marks))
"""

BARE_RAY_INIT = """
import json, sys, time
started = time.time()
import ray
ray.init(include_dashboard=False, logging_level="ERROR")
print(json.dumps({"ray_init_s": time.time() - started}))
ray.shutdown()
"""

PLAIN_RAY_DATA = """
import json, sys, time
spawned = float(sys.argv[1])
import ray, ray.data
ray.init(include_dashboard=False, logging_level="ERROR")
initialized = time.time()
ray.data.DataContext.get_current().enable_progress_bars = False

class Identity:
    def __call__(self, batch):
        return batch

dataset = ray.data.read_parquet(sys.argv[2]).map_batches(
    Identity, compute=ray.data.ActorPoolStrategy(size=1), batch_size=32768)
next(iter(dataset.iter_batches(batch_size=1024)))
print(json.dumps({"first_batch_after_init_s": time.time() - initialized,
                  "first_batch_s": time.time() - spawned}))
ray.shutdown()
"""

D3RLPY = f"""
import json, sys, time
spawned = float(sys.argv[1])
import d3rlpy, gymnasium as gym, numpy as np, pyarrow.parquet as pq
from pathlib import Path
marks = {{"imports_s": time.time() - spawned}}
table = pq.read_table(sorted(Path(sys.argv[2]).rglob("*.parquet")))
column = lambda name: np.asarray(table.column(name).to_pylist())
dataset = d3rlpy.dataset.MDPDataset(
    observations=column("obs").astype(np.float32), actions=column("actions"),
    rewards=column("rewards").astype(np.float32), terminals=column("terminateds"),
    timeouts=column("truncateds"))
d3rlpy.seed(0)
algo = d3rlpy.algos.DiscreteBCConfig(
    batch_size={BATCH}, learning_rate={LR},
    encoder_factory=d3rlpy.models.VectorEncoderFactory(hidden_units={HIDDENS}),
).create(device="cpu:0")
env = gym.make("CartPole-v1")
algo.build_with_env(env)
marks["build_s"] = time.time() - spawned
for update in range(1, {MAX_ITERATIONS} + 1):
    algo.update(dataset.sample_transition_batch({BATCH}))
    if update % {EVALUATION_INTERVAL}:
        continue
    score = d3rlpy.metrics.evaluate_qlearning_with_environment(algo, env,
                                                               n_trials={EVALUATION_EPISODES})
    if score >= {TARGET_RETURN}:
        marks["to_return_450_s"] = time.time() - spawned
        marks["iterations"] = update
        break
print(json.dumps(marks))
"""


def spawn(code: str, data: Path | None = None, python: str = sys.executable) -> dict:
    """Runs ``code`` in a fresh process (given its spawn time and ``data``); its last line of
    output, a JSON object."""
    spawned = time.time()
    out = subprocess.run([python, "-c", code, repr(spawned), str(data or "")],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def record_dataset(folder: Path, seed: int) -> Path:
    """A new CartPole expert dataset of ``EPISODES`` episodes, written by our CLI."""
    cli = Path(sys.executable).parent / "offline-rl"
    subprocess.run([str(cli), "datasets", "make", "CartPole-v1", "expert", "--out", str(folder),
                    "--episodes", str(EPISODES), "--seed", str(seed)],
                   capture_output=True, check=True, timeout=600)
    return folder


def torch_update_ms() -> float:
    """The bare torch update of the same module at the same batch, on random observations."""
    import gymnasium as gym
    import numpy as np

    from offline_rl import BCConfig

    config = BCConfig().training(lr=LR).rl_module(model_config={"fcnet_hiddens": HIDDENS})
    spaces = gym.make("CartPole-v1").observation_space, gym.spaces.Discrete(2)
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(BATCH, 4)).astype(np.float32),
             "actions": rng.integers(0, 2, BATCH)}
    return bare_torch_update_ms(config, spaces, batch)


def summary(runs: list[dict]) -> dict:
    """``{figure: [min, median]}`` over the runs that report it."""
    figures = sorted({name for run in runs for name in run})
    return {name: [round(min(values), 2), round(statistics.median(values), 2)]
            for name in figures
            for values in [[run[name] for run in runs if run.get(name) is not None]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--d3rlpy-python", default=None, metavar="PYTHON",
                        help="a Python with d3rlpy installed, to time it beside us")
    args = parser.parse_args()
    ours, bare_init, plain_data, d3rlpy = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            data = record_dataset(Path(tmp) / f"cartpole-{run}", seed=100 + run)
            ours.append(spawn(OURS, data))
            bare_init.append(spawn(BARE_RAY_INIT))
            plain_data.append(spawn(PLAIN_RAY_DATA, data))
            if args.d3rlpy_python:
                d3rlpy.append(spawn(D3RLPY, data, args.d3rlpy_python))
    print(json.dumps({
        "ours": summary(ours),
        "bare_ray_init": summary(bare_init),
        "plain_ray_data": summary(plain_data),
        "bare_torch_update_ms": round(torch_update_ms(), 3),
        "d3rlpy": summary(d3rlpy) if d3rlpy else None,
        "runs": args.runs, "rows": EPISODES * 500, "batch": BATCH,
        "figures": "[min, median] seconds since the process was spawned",
    }))


if __name__ == "__main__":
    main()
