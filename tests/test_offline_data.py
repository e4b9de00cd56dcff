"""OfflineData on a real local Ray instance: exact batches, epochs, resources, bad input."""

from __future__ import annotations

import logging
import threading
import time

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from offline_rl import OfflineData
from offline_rl.data.feed.batch_stream import STOP_WAIT_S, BatchStream
from offline_rl.data.feed.epoch_batches import EpochBatches
from offline_rl.data.feed.learner_feed import MixedFeed, PipelineFeed, SampleFeed
from offline_rl.data.pipeline.execution_plan import ExecutionPlan
from offline_rl.data.pipeline.resources import prelearner_pool_kwargs
from offline_rl.data.prelearner.data_ledger import LedgerBook, LedgerClient, open_book
from offline_rl.data.ray.actors import kill_actors
from offline_rl.data.ray.iteration_threads import RAY_DATA_ITERATION_THREAD
from offline_rl.errors import ConfigError, DataFormatError, ResourceError

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))


@pytest.mark.parametrize("materialize", [(False, True), (False, False), (True, False)],
                         ids=["mapped-data", "epoch-by-epoch", "repeated-epochs"])
@pytest.mark.slow
def test_batches_are_exact_and_cover_every_row_each_epoch(ray_session, bc_config, materialize):
    raw, mapped = materialize
    config = bc_config.offline_data(materialize_data=raw, materialize_mapped_data=mapped,
                                    iter_batches_kwargs={"local_shuffle_buffer_size": None})
    data = OfflineData(config, SPACES).start()
    try:
        rows_per_epoch = 20_000  # 40 episodes x 500 steps
        batch_size = config.train_batch_size_per_learner
        seen = []
        while data.stats.epochs_completed < 2:
            batch = data.sample()
            assert {len(column) for column in batch.values()} == {batch_size}
            seen.append(batch["obs"])
        assert data.stats.epoch_rows[:2] == [rows_per_epoch, rows_per_epoch]
        first_epoch = np.concatenate(seen)[:rows_per_epoch]
        assert len(np.unique(first_epoch, axis=0)) == rows_per_epoch
        assert sorted(batch) == ["action_dist_inputs", "action_logp", "actions", "new_obs",
                                 "obs", "rewards", "terminateds", "truncateds"]
        assert batch["obs"].dtype == np.float32 and batch["obs"].shape == (batch_size, 4)
    finally:
        data.stop()


@pytest.mark.slow
def test_streamed_epochs_share_one_execution_and_resume_in_the_same_order(ray_session,
                                                                          bc_config):
    config = bc_config.offline_data(materialize_data=True, materialize_mapped_data=False,
                                    input_read_batch_size=5_000).debugging(seed=3)
    data = OfflineData(config, SPACES).start()
    try:
        assert data.plan is ExecutionPlan.MANY_EPOCHS_PER_EXECUTION
        data.sample()
        prelearners = data.prelearners.book.registered_actors()
        assert prelearners and all(isinstance(actor, ray.actor.ActorHandle)
                                   for actor in prelearners)
        while data.stats.epochs_completed < 3:
            data.sample()
        assert data.stats.epoch_rows == [20_000] * 3
        assert data.prelearners.book.registered_actors() == prelearners  # no new pool per epoch
        assert "MapBatches(EpochsPreLearner)" in data.pipeline_stats()["operators"]
        data.sample(3000)  # mid-epoch: 3000 rows into the fourth epoch's 20k
        position = data.stream.saved_position()
        expected = [data.sample()["obs"] for _ in range(40)]  # into the fifth epoch
        data.stream.stop()
        resumed = data.feeds(0)[0].open(position)
        assert all(np.array_equal(resumed.next_batch(len(obs))["obs"], obs) for obs in expected)
        assert resumed.stats.epochs_completed == 4
        resumed.stop()
    finally:
        data.stop()


@ray.remote(num_cpus=0)
class NoteRecorder:
    """A ledger stand-in that records the episode notes and claims it receives, answering
    claims as the ledger does (an episode's first source holds it)."""

    def __init__(self):
        self.notes, self.claims, self.sources = [], [], {}

    def note_episodes(self, book, open_ids, ended_ids):
        self.notes.append((open_ids, ended_ids))

    def claim(self, book, episode_ids, sources):
        self.claims.append(list(zip(episode_ids, sources)))
        return [self.sources.setdefault(id_, source) != source
                for id_, source in zip(episode_ids, sources)]

    def received(self):
        return self.notes, self.claims


class OwnSample:
    """A data object whose ``sample()`` is its own (an override of RLlib's)."""

    def sample(self, num_samples: int) -> dict[str, np.ndarray]:
        return {"x": np.zeros(num_samples)}


def test_a_feed_that_cannot_resume_says_so_and_a_mix_refuses_another_count_of_sources():
    saved = {"epoch": 1, "rows": 8, "ended": False, "epochs_completed": 1, "epoch_rows": [10]}
    with pytest.warns(UserWarning, match=r"data position is not resumed: OwnSample overrides "
                                         r"sample\(\)"):
        stream = SampleFeed(OwnSample()).open(saved)
    assert stream.next_batch(3)["x"].shape == (3,) and stream.saved_position() is None
    feed = PipelineFeed(lambda: np.arange(10), None)
    mix = MixedFeed([feed, feed], [0.5, 0.5], ["a", "b"])
    with pytest.raises(DataFormatError, match=r"mixes 1 sources, this run 2: \['a', 'b'\]"):
        mix.open({"mix": {"sources": [saved]}})


def test_the_plan_is_chosen_for_the_configs_learners_and_other_learner_counts_are_refused(
        bc_config):
    streamed = bc_config.offline_data(materialize_data=True, materialize_mapped_data=False)
    one = OfflineData(streamed, SPACES)
    assert one.plan is ExecutionPlan.MANY_EPOCHS_PER_EXECUTION
    with pytest.raises(ConfigError, match=r"many epochs per execution.*one learner.*"
                                          r"learners\(num_learners=2\)"):
        one.feeds(2)
    two = OfflineData(streamed.learners(num_learners=2), SPACES)
    assert two.plan is ExecutionPlan.STREAMED_PER_EPOCH


def test_a_prelearner_notes_each_episode_once_and_the_totals_are_those_of_every_note(
        ray_session):
    """A part mapped again in a later epoch notes the same episodes: its PreLearner's client
    sends only what it has not noted (no actor call per part after the first epoch), and the
    ledger counts the same unfinished episodes as when it is sent every note."""
    notes = [(["a"], ["z"]), (["b"], ["a"])] * 2 + [(["a", "c"], [])]  # two epochs, then more
    recorder, direct, through = NoteRecorder.remote(), open_book(), open_book()
    recording = LedgerClient(LedgerBook(recorder, "recorded"))
    client = LedgerClient(through)
    for open_ids, ended_ids in notes:
        recording.note_episodes(open_ids, ended_ids)
        client.note_episodes(open_ids, ended_ids)
        ray.get(direct.ledger.note_episodes.remote(direct.name, open_ids, ended_ids))
    assert ray.get(recorder.received.remote())[0] == [(["a"], ["z"]), (["b"], ["a"]),
                                                      (["c"], [])]
    totals = [through.close()[0], direct.close()[0]]
    assert totals == [{"unfinished_episodes": 2}] * 2  # b and c: a and z ended
    ray.kill(recorder)


def test_a_prelearner_claims_each_episode_of_a_source_once_and_keeps_the_ledgers_answer(
        ray_session):
    """A part mapped again in a later epoch claims the same episodes from the same file: the
    ledger's answer cannot change (an episode's first source keeps it), so the client asks
    only about pairs it has not claimed, and answers the rest as the ledger did."""
    recorder = NoteRecorder.remote()
    first, second = (LedgerClient(LedgerBook(recorder, "recorded")) for _ in range(2))
    assert first.claim(["a", "b", "a"], ["x", "x", "x"]) == [False] * 3
    assert second.claim(["b", "c"], ["y", "y"]) == [True, False]  # b is x's
    assert first.claim(["b", "a"], ["x", "x"]) == [False, False]  # a later epoch: no call
    assert second.claim(["c", "b", "d"], ["y", "y", "y"]) == [False, True, False]
    assert ray.get(recorder.received.remote())[1] == [
        [("a", "x"), ("b", "x")], [("b", "y"), ("c", "y")], [("d", "y")]]
    ray.kill(recorder)


def test_a_process_keeps_its_pipelines_books_in_one_ledger_started_again_if_it_died(
        ray_session, bc_config):
    """Every pipeline a process builds opens a book in the process's one ledger actor (no
    actor process per pipeline); a stopped pipeline's book is closed, so a PreLearner that
    registers late is told to exit; a ledger that died is replaced by the next pipeline's."""
    ledgers = []
    for _ in range(2):
        data = OfflineData(bc_config, SPACES).start()
        data.sample()
        book = data.prelearners.book
        assert len(book.registered_actors()) == 1
        data.stop()
        ledgers.append(book.ledger)
        assert not ray.get(book.ledger.register.remote(book.name, b"late"))
    assert ledgers[0] == ledgers[1]
    kill_actors([ledgers[0]])
    book = open_book()
    assert book.ledger != ledgers[0]
    LedgerClient(book).count({"nonfinite_rows": 3})
    assert book.close() == ({"nonfinite_rows": 3}, [])


def test_custom_prelearner_runs_in_the_actor_pool(ray_session, bc_config):
    config = bc_config.offline_data(prelearner_class="tests.prelearners:NegatedRewards")
    data = OfflineData(config, SPACES).start()
    try:
        assert (data.sample()["rewards"] == -1.0).all()
    finally:
        data.stop()


@pytest.mark.parametrize(("prelearner", "materialize_mapped_data"),
                         [("Stalls", True), ("StartsSlowly", False)],
                         ids=["materializing", "streamed-epoch-starting"])
def test_stopping_a_stream_ends_its_execution_quietly(ray_session, tmp_path, bc_config,
                                                      prelearner, materialize_mapped_data):
    """The stream runs its Ray Data executions in a thread: the materialization of the mapped
    data, or each streamed epoch (an execution of its own, its PreLearner actors started anew,
    so a run that stops at an epoch's end stops one whose actors are starting). ``stop()`` must
    end that execution and its thread: left running, it touched Ray after ``ray.shutdown()``
    (Ray Data then started a new local instance), and Ray Data reported the actors killed
    under it as the execution's failure (an ERROR with a traceback, and "execution failed")."""
    started = tmp_path / "started"
    config = bc_config.offline_data(
        materialize_mapped_data=materialize_mapped_data,
        prelearner_class=f"tests.prelearners:{prelearner}",
        prelearner_kwargs={"started": str(started)})
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("ray.data").addHandler(handler)
    streams_before = set(threading.enumerate())
    try:
        data = OfflineData(config, SPACES).start()
        stream = data.feeds(0)[0].open()
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the PreLearner actor never got that far"
        stream.stop()
        data.stop()
    finally:
        logging.getLogger("ray.data").removeHandler(handler)
    assert [thread for thread in set(threading.enumerate()) - streams_before
            if thread.name == "offline-rl-batch-stream"] == []
    assert [record.getMessage() for record in records if record.levelno >= logging.ERROR
            or "execution failed" in record.getMessage()] == []


def test_a_stopped_algorithm_leaves_no_ray_data_iteration_running(ray_session, bc_config):
    """Ray Data's ``iter_batches`` threads clean up through Ray as they end: one still running
    after ``stop()``, with repeated epochs, made a script whose algorithm had started Ray exit
    with code 1 at ``ray.shutdown()`` ("The core worker has already been shutdown")."""
    config = bc_config.training(train_batch_size_per_learner=1024).offline_data(
        dataset_num_iters_per_learner=10, materialize_data=True, materialize_mapped_data=False)
    before = set(threading.enumerate())  # other libraries' iterations are not ours to end
    with config.build() as algo:
        algo.train()
    assert [thread for thread in threading.enumerate()
            if thread.name == RAY_DATA_ITERATION_THREAD and thread not in before] == []


def test_a_stream_stopped_beside_a_running_one_waits_for_its_own_iteration_only(ray_session):
    """Two streams fetching at once (the sources of a mix, a multi-agent run's modules) both
    note the iteration threads that start meanwhile: stopping the first ends those only it
    noted and does not wait the whole ``STOP_WAIT_S`` for the second's; stopping the second,
    the last, ends them all."""
    dataset = ray.data.range(200_000)
    first, second = (BatchStream(lambda: dataset, EpochBatches(batch_size=100)).start()
                     for _ in range(2))
    for stream in (first, second):
        stream.next_batch(100)
    started = time.monotonic()
    first.stop()
    stopping_took = time.monotonic() - started
    theirs = second.iteration_threads
    second.stop()
    assert first.iteration_threads and theirs
    assert not any(thread.is_alive() for thread in first.iteration_threads - theirs)
    assert stopping_took < STOP_WAIT_S
    assert not any(thread.is_alive() for thread in first.iteration_threads | theirs)


def test_errors_in_the_actor_pool_reach_the_caller(ray_session, tmp_path, bc_config):
    good = pa.table({"obs": [[0.0] * 4] * 2, "new_obs": [[0.0] * 4] * 2, "actions": [0, 1],
                     "rewards": [1.0, 1.0], "terminateds": [False, True]})
    pq.write_table(good, tmp_path / "a-good.parquet")  # the driver checks this first file
    ragged = good.set_column(0, "obs", pa.array([[0.0] * 4, [0.0, 1.0]]))
    pq.write_table(ragged, tmp_path / "b-ragged.parquet")
    data = OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES).start()
    try:
        with pytest.raises(DataFormatError, match="'obs' is ragged") as caught:
            data.sample()
        assert isinstance(caught.value.__cause__, ray.exceptions.RayError)
    finally:
        data.stop()


def test_missing_path_and_folder_without_parquet(tmp_path, bc_config):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path / "nope")), SPACES)
    (tmp_path / "notes.txt").write_text("not data")
    with pytest.raises(DataFormatError, match=r"no Parquet files \(\*\.parquet\) under"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_missing_column_names_the_file(tmp_path, bc_config):
    pq.write_table(pa.table({"obs": [[0.0] * 4], "actions": [0], "rewards": [1.0],
                             "terminateds": [True]}), tmp_path / "part.parquet")
    with pytest.raises(DataFormatError, match=r"part\.parquet has no column\(s\) \['new_obs'\]"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_folders_with_and_without_a_column_are_read_for_the_columns_they_share(
        ray_session, cartpole_data, tmp_path, bc_config):
    """The seed's ``input_=[folder_a, folder_b]`` where only one folder's files hold
    ``action_logp``: read as one dataset of the columns both hold, with a warning."""
    table = pq.read_table(next(cartpole_data.rglob("*.parquet")))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pq.write_table(table.slice(0, 1000), tmp_path / "a" / "part.parquet")
    pq.write_table(table.slice(1000, 1000).drop_columns(["action_logp"]),
                   tmp_path / "b" / "part.parquet")
    config = bc_config.offline_data(input_=[str(tmp_path / "a"), str(tmp_path / "b")],
                                    iter_batches_kwargs={"local_shuffle_buffer_size": None})
    config.training(train_batch_size_per_learner=500)
    with pytest.warns(UserWarning, match=r"without \['action_logp'\] \(.*b/part\.parquet "
                                         "lacks them"):
        data = OfflineData(config, SPACES).start()
    try:
        batches = [data.sample() for _ in range(4)]
    finally:
        data.stop()
    assert "action_logp" not in batches[0]
    assert len(np.unique(np.concatenate([batch["obs"] for batch in batches]), axis=0)) == 2000


def test_a_column_of_two_types_names_both_files(cartpole_data, tmp_path, bc_config):
    table = pq.read_table(next(cartpole_data.rglob("*.parquet"))).slice(0, 10)
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.set_column(table.schema.get_field_index("rewards"), "rewards",
                                    pa.array(range(10), pa.int64())), tmp_path / "b.parquet")
    with pytest.raises(DataFormatError, match=r"column 'rewards' is double in .*a\.parquet but "
                                              r"int64 in .*b\.parquet"):
        OfflineData(bc_config.offline_data(input_=str(tmp_path)), SPACES)


def test_observation_shape_mismatch_names_column_and_space(cartpole_data, bc_config):
    wrong = (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2))
    with pytest.raises(DataFormatError, match=r"column 'obs' holds arrays of shape \(4,\).*\(3,\)"):
        OfflineData(bc_config, wrong)


def test_pool_defaults_fit_the_cluster_and_impossible_requests_fail():
    def pool_size(kwargs):
        return kwargs["compute"].min_size, kwargs["compute"].max_size

    small = prelearner_pool_kwargs({}, {"CPU": 2}, 0)
    assert small["num_cpus"] == 1 and pool_size(small) == (1, 1)
    assert pool_size(prelearner_pool_kwargs({}, {"CPU": 16}, 4)) == (4, 4)
    # num_cpus left to offline-rl: the actors share the CPU the read task leaves, saying so
    with pytest.warns(UserWarning, match=r"PreLearner actors take 0.5 CPU each \(map_batches_"
                                         r"kwargs\['num_cpus'\] not set\): 2 x 1 CPU do not fit"):
        shared = prelearner_pool_kwargs({"concurrency": 2}, {"CPU": 2}, 0)
    assert shared["num_cpus"] == 0.5 and pool_size(shared) == (2, 2)
    with pytest.raises(ResourceError, match="needs 2 actor.*= 3 CPUs.*has 2"):
        prelearner_pool_kwargs({"concurrency": 2, "num_cpus": 1}, {"CPU": 2}, 0)
    with pytest.raises(ConfigError, match="batch_size"):
        prelearner_pool_kwargs({"batch_size": 64}, {"CPU": 8}, 0)
    assert pool_size(prelearner_pool_kwargs({"concurrency": (1, 4), "num_cpus": 0.5},
                                            {"CPU": 2}, 0)) == (1, 4)
