"""Reference datasets: a tier's behaviour policy recorded in its env, with a dataset card."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from offline_rl.columns import Columns
from offline_rl.datasets.experts import EXPECTED_RETURNS, BehaviourPolicy, behaviour_policy
from offline_rl.errors import ConfigError, OutputError
from offline_rl.evaluation.multi_agent_env import make_multi_agent_env
from offline_rl.evaluation.multi_agent_rollout import (
    multi_agent_episode_statistics,
    multi_agent_rollout,
)
from offline_rl.evaluation.rollout import make_env, rollout
from offline_rl.recording.manifests import MANIFEST_FOLDER, RunManifest, file_entry
from offline_rl.recording.output_folder import (
    claim_output_folder,
    new_run_id,
    remove_earlier_output,
    write_failure,
)
from offline_rl.recording.writer import EpisodeWriter
from offline_rl.reference_datasets import MULTI_AGENT_ENVS
from offline_rl.statistics import episode_statistics

CARD_FILE = "dataset.json"
GENERATOR_VERSION = 4


def make_dataset(env_id: str, out: str | Path, *, tier: str = "expert", episodes: int = 100,
                 seed: int = 0, write_episodes: bool = False, compress_columns: list[str] = (),
                 max_rows_per_file: int | None = None, progress: bool = True,
                 overwrite: bool = False) -> dict[str, Any]:
    """Records ``episodes`` episodes of ``tier``'s behaviour policy (``random``, ``medium``,
    ``expert`` or ``mixed``) for ``env_id`` under ``out``; returns the dataset card. In a
    multi-agent env of ``MULTI_AGENT_ENVS`` every agent plays the tier's policy of its
    single-agent env (the card's band is each agent's); its tabular rows name their agent,
    and ``write_episodes`` writes ``MultiAgentEpisode`` states.

    Deterministic given ``seed``: episode ``i`` is reset with ``seed + i`` and the policy's own
    randomness is seeded. ``action_logp`` and ``action_dist_inputs`` of the behaviour policy are
    recorded. Data is written to a hidden staging folder inside ``out`` and moved into place
    once complete, with the card (``dataset.json``: env, tier, format,
    ``offline_rl.statistics.episode_statistics`` of the episodes, the tier's expected return
    band, generator version, seed) written last.

    ``out`` must be new or empty: a folder holding other files, or an earlier dataset, is
    refused with an ``OutputError`` naming them, unless ``overwrite=True``; then the earlier
    dataset's files (those its manifest lists) are replaced and every other file is kept.

    Examples:
        >>> import tempfile
        >>> card = make_dataset("CartPole-v1", tempfile.mkdtemp() + "/d", tier="random",
        ...                     episodes=3, progress=False)
        >>> card["num_episodes"], card["tier"]
        (3, 'random')
    """
    from tqdm import tqdm

    if isinstance(episodes, bool) or not isinstance(episodes, int | np.integer) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r}: a dataset needs a whole number of episodes, "
                          "at least 1")
    record = _record_multi_agent if env_id in MULTI_AGENT_ENVS else _record_single_agent
    policy_name = type(behaviour_policy(MULTI_AGENT_ENVS.get(env_id, env_id), tier, seed)).__name__
    filesystem, folder = pafs.LocalFileSystem(), Path(out).absolute().as_posix()
    earlier = claim_output_folder(str(out), filesystem, folder, writer="datasets make",
                                  overwrite=overwrite)
    card_file = Path(folder) / CARD_FILE
    if card_file.exists() and CARD_FILE not in earlier:
        raise OutputError(f"datasets make: {card_file} was not written by offline-rl and the "
                          "dataset card would replace it; move it away or choose another folder")
    run_id = new_run_id()
    staging = Path(folder) / MANIFEST_FOLDER / f"staging-{run_id}"
    writer = None
    try:
        writer = EpisodeWriter(staging.as_posix(), env_name=env_id, run_id=run_id,
                               write_episodes=write_episodes, compress_columns=compress_columns,
                               max_rows_per_file=max_rows_per_file)
        statistics = record(env_id, tier, seed, episodes, writer,
                            lambda recorded: tqdm(recorded, total=episodes, unit="episode",
                                                  desc=f"recording {env_id} ({tier})",
                                                  disable=not progress))
        writer.flush()
        for relative in writer.files_written:  # file names hold the run id: none is taken yet
            (Path(folder) / relative).parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging / relative, Path(folder) / relative)
    except OSError as error:  # a full disk, a file over the size limit
        written = sum(file.stat().st_size for file in staging.rglob("*") if file.is_file())
        raise write_failure("datasets make", str(out), error, kept="nothing of this dataset "
                            "was kept (its staging folder is removed) and the folder's earlier "
                            "files are as they were",
                            needed_bytes=written + (writer.buffered_bytes if writer else 0)
                            ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    card = {
        "env": env_id,
        "tier": tier,
        "format": "episodes" if write_episodes else "tabular",
        **statistics,
        "expected_return_mean_band": list(EXPECTED_RETURNS[MULTI_AGENT_ENVS.get(env_id, env_id)]
                                          [tier]),
        "behaviour_policy": policy_name,
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
    }
    temporary = f"{MANIFEST_FOLDER}/{CARD_FILE}.{run_id}.tmp"
    (Path(folder) / temporary).write_text(json.dumps(card, indent=2))
    card_entry = dataclasses.replace(file_entry(filesystem, folder, temporary), path=CARD_FILE)
    RunManifest(filesystem, folder, run_id).add_entries([*writer.manifest.entries.values(),
                                                         card_entry])
    os.replace(Path(folder) / temporary, card_file)
    remove_earlier_output(filesystem, folder, keep_run=run_id, writer="datasets make")
    return card


def _record_single_agent(env_id: str, tier: str, seed: int, episodes: int,
                         writer: EpisodeWriter, progress: Callable[[Iterable], Iterable]
                         ) -> dict[str, Any]:
    """Records ``episodes`` of ``tier``'s policy in ``env_id``; their statistics."""
    policy = behaviour_policy(env_id, tier, seed)
    returns, lengths = [], []
    env = make_env(env_id)
    try:
        for episode in progress(rollout([env], _BatchOfOne(policy), episodes, seed=seed,
                                        on_episode_start=lambda _: policy.start_episode())):
            writer.add([episode])
            returns.append(episode.get_return())
            lengths.append(len(episode))
    finally:
        env.close()
    return episode_statistics(returns, lengths)


def _record_multi_agent(env_id: str, tier: str, seed: int, episodes: int,
                        writer: EpisodeWriter, progress: Callable[[Iterable], Iterable]
                        ) -> dict[str, Any]:
    """Records ``episodes`` of the multi-agent ``env_id``, each agent playing ``tier``'s policy
    of the env ``MULTI_AGENT_ENVS`` names, seeded apart (each agent is its own behaviour
    module: the rows' ``module_id`` is their agent's id); their statistics, per agent too."""
    env = make_multi_agent_env(env_id)
    seeds = np.random.SeedSequence(seed).spawn(len(env.possible_agents))
    policies = {agent: behaviour_policy(MULTI_AGENT_ENVS[env_id], tier,
                                        int(child.generate_state(1)[0]))
                for agent, child in zip(env.possible_agents, seeds)}
    recorded = []
    try:
        for episode in progress(multi_agent_rollout(
                [env], {agent: _BatchOfOne(policy) for agent, policy in policies.items()},
                {agent: agent for agent in policies}, episodes, seed=seed,
                on_episode_start=lambda _: [policy.start_episode()
                                            for policy in policies.values()])):
            writer.add([episode])
            recorded.append(episode)
    finally:
        env.close()
    return multi_agent_episode_statistics(recorded)


class _BatchOfOne:
    """A per-observation behaviour policy as a batch policy for one env."""

    def __init__(self, policy: BehaviourPolicy):
        self.policy = policy

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        action, logp, dist_inputs = self.policy(obs[0])
        return np.asarray([action]), {
            Columns.ACTION_LOGP: np.asarray([logp], dtype=np.float32),
            Columns.ACTION_DIST_INPUTS: np.asarray(dist_inputs, dtype=np.float32)[None],
        }
