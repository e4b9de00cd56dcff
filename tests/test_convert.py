"""Converting tabular Parquet and legacy SampleBatch JSON into episodes Parquet."""

from __future__ import annotations

import base64
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from offline_rl import BCConfig, OfflinePreLearner
from offline_rl.compression import pack_array
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import DataFormatError, OutputError
from offline_rl.formats.episode_input import decode_episode, sample_batch_to_episodes
from offline_rl.inspection import inspect_dataset
from offline_rl.recording.convert import (
    minari_to_episodes,
    sample_batches_to_episodes,
    tabular_to_episodes,
)
from offline_rl.recording.manifests import MANIFEST_FOLDER
from offline_rl.recording.writer import EpisodeWriter

FIXTURES = Path(__file__).parent / "fixtures"
TABULAR = FIXTURES / "rllib_cartpole_tabular"
EPISODES = FIXTURES / "rllib_cartpole_episodes"
SAMPLE_BATCHES = FIXTURES / "rllib_cartpole_sample_batch_json"
SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
#: The fixture's last episode: the recording stopped before it ended.
UNFINISHED = "e55e046f4c904c108308feaad63e8331"


def read_episodes(output: Path) -> dict[str, SingleAgentEpisode]:
    """The converted episodes, decoded as the PreLearner decodes them, by id."""
    episodes = {}
    for file in sorted(output.rglob("*.parquet")):
        for item in pq.read_table(file).column("item").to_pylist():
            episode = decode_episode(item, str(file))
            assert episode.id_ not in episodes
            episodes[episode.id_] = episode
    return episodes


def fixture_rows_by_episode() -> dict[str, list[dict]]:
    """The tabular fixture's rows grouped by eps_id, in file order (it has no 't' column)."""
    rows = defaultdict(list)
    for file in sorted(TABULAR.rglob("*.parquet")):
        for row in pq.read_table(file).to_pylist():
            rows[row["eps_id"]].append(row)
    return rows


def sample_batch(eps_id: int, steps: range, *, done: bool) -> dict:
    """A SampleBatch line holding steps ``steps`` of episode ``eps_id`` (obs = t + 10 * id)."""
    t = list(steps)
    return {"type": "SampleBatch", "eps_id": [eps_id] * len(t), "t": t,
            "obs": [[10.0 * eps_id + i, 0.0] for i in t],
            "new_obs": [[10.0 * eps_id + i + 1, 0.0] for i in t],
            "actions": [i % 2 for i in t], "rewards": [float(i) for i in t],
            "terminateds": [done and i == t[-1] for i in t], "truncateds": [False] * len(t)}


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_rllib_tabular_recording_becomes_its_episodes(ray_session, tmp_path):
    output = tmp_path / "episodes"
    summary = tabular_to_episodes(str(TABULAR), str(output), incomplete="drop")
    expected = fixture_rows_by_episode()
    complete = {eps_id: rows for eps_id, rows in expected.items() if rows[-1]["terminateds"]}
    assert list(expected) != list(complete) and UNFINISHED not in complete
    assert summary["episodes"] == len(complete) == len(expected) - 1
    assert summary["dropped_incomplete"] == 1
    assert summary["steps"] == sum(len(rows) for rows in complete.values())
    (written,) = [Path(file).name for file in summary["files"]]
    assert re.fullmatch(r"episodes-\d{8}-\d{6}-[0-9a-f]{6}-00000\.parquet", written)
    assert sorted(path.name for path in output.iterdir()) == [MANIFEST_FOLDER, written]

    episodes = read_episodes(output)
    assert sorted(episodes) == sorted(complete)
    for eps_id, rows in complete.items():
        episode = episodes[eps_id]
        assert (episode.t_started, len(episode), episode.is_terminated) == (0, len(rows), True)
        np.testing.assert_array_equal(episode.get_actions(), [row["actions"] for row in rows])
        np.testing.assert_array_equal(episode.get_rewards(), [row["rewards"] for row in rows])
        np.testing.assert_allclose(episode.get_observations(),
                                   [row["obs"] for row in rows] + [rows[-1]["new_obs"]])
        observations = episode.get_observations()
        np.testing.assert_allclose(observations[1:], [row["new_obs"] for row in rows])
        assert sorted(episode.extra_model_outputs) == ["action_dist_inputs", "action_logp",
                                                       "weights_seq_no"]
        np.testing.assert_allclose(episode.get_extra_model_outputs("action_logp"),
                                   [row["action_logp"] for row in rows])

    # What training reads: the PreLearner decodes the files as RLlib-recorded episodes, and
    # inspection sees the same episodes.
    config = (BCConfig().environment("CartPole-v1").training(train_batch_size_per_learner=32)
              .offline_data(input_=str(output), input_read_episodes=True).debugging(seed=0))
    batch = train_columns(OfflinePreLearner(config, SPACES)(pq.read_table(summary["files"][0])))
    assert batch["obs"].shape[1:] == (4,) and len(batch["actions"]) >= 32
    inspected = inspect_dataset(str(output))
    assert (inspected["format"], inspected["episodes"], inspected["steps"]) == (
        "episodes", summary["episodes"], summary["steps"])


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_an_input_over_one_partition_is_grouped_by_ray_datas_shuffle_into_the_same_episodes(
        ray_session, tmp_path, monkeypatch):
    """An input that fits one partition (``PARTITION_BYTES``) is grouped by a sort in Ray tasks;
    a larger one by the shuffle Ray Data is set to, a partition per ``PARTITION_BYTES``."""
    from ray.data import DataContext
    from ray.data.context import ShuffleStrategy

    from offline_rl.recording import convert

    group_by, strategies = convert._group_by, []

    def recorded(rows, key, input_bytes):
        grouped = group_by(rows, key, input_bytes)
        strategies.append(rows.context.shuffle_strategy)
        return grouped

    monkeypatch.setattr(convert, "_group_by", recorded)
    one = tabular_to_episodes(str(TABULAR), str(tmp_path / "one"))
    input_bytes = sum(file.stat().st_size for file in TABULAR.rglob("*.parquet"))
    monkeypatch.setattr(convert, "PARTITION_BYTES", input_bytes // 2 + 1)  # two partitions
    two = tabular_to_episodes(str(TABULAR), str(tmp_path / "two"))
    assert strategies == [ShuffleStrategy.SORT_SHUFFLE_PULL_BASED,
                          DataContext.get_current().shuffle_strategy]
    assert strategies[1] != strategies[0]
    assert {key: one[key] for key in ("episodes", "steps", "unfinished_episodes")} == {
        key: two[key] for key in ("episodes", "steps", "unfinished_episodes")}
    from_one, from_two = read_episodes(tmp_path / "one"), read_episodes(tmp_path / "two")
    assert sorted(from_one) == sorted(from_two) == sorted(fixture_rows_by_episode())
    for eps_id, episode in from_one.items():
        np.testing.assert_array_equal(episode.get_observations(),
                                      from_two[eps_id].get_observations())
        np.testing.assert_array_equal(episode.get_actions(), from_two[eps_id].get_actions())


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_unfinished_episode_is_kept_as_a_chunk_by_default_or_refused_naming_it(ray_session,
                                                                               tmp_path):
    summary = tabular_to_episodes(str(TABULAR), str(tmp_path / "kept"))
    rows = fixture_rows_by_episode()
    assert (summary["episodes"], summary["unfinished_episodes"],
            summary["dropped_incomplete"]) == (len(rows), 1, 0)
    assert summary["steps"] == sum(len(episode_rows) for episode_rows in rows.values())
    unfinished = read_episodes(tmp_path / "kept")[UNFINISHED]
    assert (len(unfinished), unfinished.is_terminated, unfinished.is_truncated) == (12, False,
                                                                                   False)
    # RLlib decodes it as the unfinished chunk it is.
    import msgpack
    import msgpack_numpy
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RLlibEpisode

    items = pq.read_table(summary["files"][0]).column("item").to_pylist()
    decoded = [RLlibEpisode.from_state(msgpack.unpackb(item, object_hook=msgpack_numpy.decode))
               for item in items]
    assert [episode.id_ for episode in decoded if not episode.is_done] == [UNFINISHED]

    with pytest.raises(DataFormatError, match=rf"episode '{UNFINISHED}' .* is not done: its "
                                              r"last step .* after 12 steps.*incomplete='keep'"):
        tabular_to_episodes(str(TABULAR), str(tmp_path / "episodes"), incomplete="error")
    assert not list((tmp_path / "episodes").rglob("*.parquet"))


@pytest.mark.timeout(180)
def test_episode_split_over_files_and_shuffled_is_rebuilt_in_t_order(ray_session, tmp_path):
    steps = 7
    observations = np.arange((steps + 1) * 2, dtype=np.float32).reshape(steps + 1, 2)
    rows = pa.table({
        "eps_id": [42] * steps + [7],
        "t": [*range(steps), 0],
        "obs": [*observations[:-1].tolist(), [-1.0, -1.0]],
        "new_obs": [*observations[1:].tolist(), [-2.0, -2.0]],
        "actions": [*range(steps), 9],
        "rewards": [0.5 * i for i in range(steps)] + [3.0],
        "dones": [False] * (steps - 1) + [True, True],  # legacy done flags
        "action_logp": [-0.1 * i for i in range(steps)] + [0.0],
    })
    order = np.random.default_rng(0).permutation(rows.num_rows)
    data = tmp_path / "tabular"
    data.mkdir()
    pq.write_table(rows.take(order[:4]), data / "a.parquet")
    pq.write_table(rows.take(order[4:]), data / "b.parquet")

    summary = tabular_to_episodes(str(data), str(tmp_path / "episodes"))
    assert (summary["episodes"], summary["steps"], summary["dropped_incomplete"]) == (2, 8, 0)
    episodes = read_episodes(tmp_path / "episodes")
    episode = episodes["42"]
    assert (len(episode), episode.is_terminated, episode.is_truncated) == (steps, True, False)
    np.testing.assert_array_equal(episode.get_observations(), observations)
    np.testing.assert_array_equal(episode.get_actions(), np.arange(steps))
    np.testing.assert_allclose(episode.get_rewards(), 0.5 * np.arange(steps))
    np.testing.assert_allclose(episode.get_extra_model_outputs("action_logp"),
                               -0.1 * np.arange(steps))
    assert len(episodes["7"]) == 1 and episodes["7"].get_return() == 3.0


@pytest.mark.timeout(180)
def test_compressed_tabular_recording_round_trips(ray_session, tmp_path):
    rng = np.random.default_rng(1)
    originals = []
    for number, (steps, truncated) in enumerate([(5, False), (3, True)]):
        episode = SingleAgentEpisode(f"ep{number}", len_lookback_buffer=0)
        episode.add_env_reset(rng.normal(size=3).astype(np.float32))
        for t in range(steps):
            episode.add_env_step(rng.normal(size=3).astype(np.float32), t % 2, float(t),
                                 {"step": t}, terminated=not truncated and t == steps - 1,
                                 truncated=truncated and t == steps - 1,
                                 extra_model_outputs={"action_logp": np.float32(-t)})
        originals.append(episode)
    writer = EpisodeWriter(str(tmp_path / "tabular"), env_name="demo", write_episodes=False,
                           compress_columns=["obs"])
    writer.add(originals)
    written = writer.flush()
    assert pa.types.is_string(pq.read_schema(written[0]).field("obs").type)

    subtree = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    summary = tabular_to_episodes("tabular", "episodes", compress_columns=["obs"],
                                  filesystem=subtree, max_rows_per_file=1)
    assert (summary["episodes"], summary["steps"]) == (2, 8)
    run = summary["files"][0].split("-", 1)[1].rsplit("-", 1)[0]  # episodes/episodes-<run>-0
    assert summary["files"] == [f"episodes/episodes-{run}-00000.parquet",
                                f"episodes/episodes-{run}-00001.parquet"]
    episodes = read_episodes(tmp_path / "episodes")
    for original in originals:
        episode = episodes[original.id_]
        np.testing.assert_array_equal(episode.get_observations(),
                                      np.asarray(original.get_observations()))
        np.testing.assert_array_equal(episode.get_actions(), original.get_actions())
        np.testing.assert_array_equal(episode.get_rewards(), original.get_rewards())
        np.testing.assert_array_equal(episode.get_extra_model_outputs("action_logp"),
                                      original.get_extra_model_outputs("action_logp"))
        assert episode.get_infos() == original.get_infos()
        assert (episode.is_terminated, episode.is_truncated) == (original.is_terminated,
                                                                  original.is_truncated)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("ids", "expected"), [
    (pa.array(["a"] * 3), r"episode 'a' .*part\.parquet\): 'new_obs' of step 0 is not the 'obs' "
                          r"of step 1 .*file order"),
    (pa.array([b"a", b"a", b"\xff"], pa.binary()).view(pa.string()),
     r"part\.parquet: column 'eps_id' holds b'\\xff' in row 2, bytes that are not UTF-8 text"),
])
def test_rows_out_of_file_order_or_ids_not_text_are_refused(ray_session, tmp_path, ids,
                                                             expected):
    rows = pa.table({"eps_id": ids, "obs": [[1.0], [0.0], [2.0]],
                     "new_obs": [[2.0], [1.0], [3.0]], "actions": [0, 0, 0],
                     "rewards": [1.0, 1.0, 1.0], "terminateds": [False, False, True]})
    (tmp_path / "tabular").mkdir()
    pq.write_table(rows, tmp_path / "tabular" / "part.parquet")
    with pytest.raises(DataFormatError, match=expected):
        tabular_to_episodes(str(tmp_path / "tabular"), str(tmp_path / "episodes"))


def test_bad_tabular_input_and_output_fail_before_any_ray_work(tmp_path):
    data = tmp_path / "tabular"
    data.mkdir()
    pq.write_table(pa.table({"obs": [[0.0]], "new_obs": [[1.0]], "actions": [0],
                             "rewards": [1.0], "terminateds": [True]}), data / "part.parquet")
    with pytest.raises(DataFormatError, match=r"part\.parquet has no column\(s\) \['eps_id'\]"
                                              r".*schema=\{field: column\}"):
        tabular_to_episodes(str(data), str(tmp_path / "out"))
    with pytest.raises(DataFormatError, match=r"already holds episodes .*input_read_episodes"):
        tabular_to_episodes(str(EPISODES), str(tmp_path / "out"))
    with pytest.raises(OutputError, match=r"holds 1 file offline-rl did not write "
                                          r"\(part\.parquet\).*--overwrite"):
        tabular_to_episodes(str(TABULAR), str(data))
    with pytest.raises(ValueError, match=r"incomplete='skip' is not supported"):
        tabular_to_episodes(str(TABULAR), str(tmp_path / "out"), incomplete="skip")
    with pytest.raises(FileNotFoundError, match=r"does not exist"):
        tabular_to_episodes(str(tmp_path / "missing"), str(tmp_path / "out"))


@pytest.mark.timeout(180)
def test_legacy_json_recording_becomes_its_episodes(ray_session, tmp_path):
    summary = sample_batches_to_episodes(str(SAMPLE_BATCHES), str(tmp_path / "episodes"))
    lines = [json.loads(line) for file in sorted(SAMPLE_BATCHES.glob("*.json"))
             for line in file.read_text().splitlines()]
    assert (summary["episodes"], summary["dropped_incomplete"]) == (30, 0) == (len(lines), 0)
    assert summary["steps"] == sum(len(line["rewards"]) for line in lines)
    episodes = read_episodes(tmp_path / "episodes")
    for number, line in enumerate(lines):
        (expected,) = sample_batch_to_episodes(line, f"line {number}")
        episode = episodes[expected.id_]
        np.testing.assert_array_equal(episode.get_observations(), expected.get_observations())
        np.testing.assert_array_equal(episode.get_actions(), expected.get_actions())
        np.testing.assert_array_equal(episode.get_rewards(), expected.get_rewards())
        np.testing.assert_array_equal(episode.get_extra_model_outputs("action_logp"),
                                      expected.get_extra_model_outputs("action_logp"))
        assert episode.is_terminated and not episode.is_truncated


@pytest.mark.timeout(180)
def test_json_fragments_of_one_episode_are_joined(ray_session, tmp_path):
    data = tmp_path / "json"
    data.mkdir()
    # Episode 5's later fragment comes first; episode 7 never ends.
    (data / "a.json").write_text(json.dumps(sample_batch(5, range(3, 6), done=True)) + "\n"
                                 + json.dumps(sample_batch(7, range(0, 2), done=False)) + "\n")
    line = sample_batch(5, range(0, 3), done=False)
    line["obs"] = base64.b64encode(pack_array(np.array(line["obs"]))).decode()  # compressed
    (data / "b.json").write_text(json.dumps(line) + "\n"
                                 + json.dumps(sample_batch(6, range(0, 2), done=True)) + "\n")

    with pytest.raises(DataFormatError, match=r"episode '7' \(in .*a\.json, line 2\) is not done"):
        sample_batches_to_episodes(str(data), str(tmp_path / "refused"), incomplete="error")
    summary = sample_batches_to_episodes(str(data), str(tmp_path / "episodes"),
                                         incomplete="drop")
    assert (summary["episodes"], summary["steps"], summary["dropped_incomplete"]) == (2, 8, 1)
    episodes = read_episodes(tmp_path / "episodes")
    assert sorted(episodes) == ["5", "6"]
    joined = episodes["5"]
    assert (joined.t_started, len(joined), joined.is_terminated) == (0, 6, True)
    np.testing.assert_array_equal(joined.get_observations()[:, 0], 50.0 + np.arange(7))
    np.testing.assert_array_equal(joined.get_actions(), np.arange(6) % 2)
    np.testing.assert_array_equal(joined.get_rewards(), np.arange(6, dtype=float))


def test_minari_needs_minari(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "minari", None)
    with pytest.raises(ImportError, match="pip install minari"):
        minari_to_episodes("cartpole/test-v0", str(tmp_path))


def test_minari_dataset_becomes_its_episodes(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    for seed in range(3):
        env.reset(seed=seed)
        done = False
        while not done:
            *_, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.create_dataset(dataset_id="cartpole/convert-test-v0")
    summary = minari_to_episodes("cartpole/convert-test-v0", str(tmp_path / "episodes"))
    dataset = minari.load_dataset("cartpole/convert-test-v0")
    assert summary["episodes"] == dataset.total_episodes == 3
    assert summary["steps"] == dataset.total_steps
    episodes = read_episodes(tmp_path / "episodes")
    for data in dataset.iterate_episodes():
        episode = episodes[f"cartpole/convert-test-v0/{data.id}"]
        np.testing.assert_array_equal(episode.get_observations(), data.observations)
        np.testing.assert_array_equal(episode.get_actions(), data.actions)
