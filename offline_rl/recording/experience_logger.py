"""``ExperienceLogger``: an application (not a simulator) logs the experience it serves.

A web service that picks actions for its users calls ``start_episode`` when a session starts,
``log_step`` after each action with what followed (reward, next observation, done flags, infos)
and the probability (or log-probability) with which the action was chosen, and ``end_episode``
when a session ends without a terminal step. Complete episodes are written with the ``output*``
options of an ``OfflineDataConfig``:

* ``output_write_episodes=True`` (default): Parquet, one msgpack episode per ``item`` row;
* ``output_write_episodes=False``: tabular rows, Parquet or JSON (``output_write_method``);
* ``sample_batches=True`` (with ``output_write_episodes=False, output_write_method="write_json"``):
  RLlib's old-stack SampleBatch JSON lines, one per episode, through ``JsonWriter``.

``offline-rl train``, ``offline-rl inspect``, off-policy estimation (the propensities are the
``action_prob``/``action_logp`` columns, both written) and RLlib read what it writes.

Every method is thread-safe: request threads may log interleaved episodes. Memory is bounded:
finished episodes are buffered only up to ``output_max_rows_per_file`` rows or
``output_max_file_size`` bytes, then written; at most ``max_open_episodes`` episodes may be open
at once (an open episode's steps are held until it ends). Files are written whole (staged, then
moved into place: ``offline_rl.recording.staging``) and listed in the run's manifest; a folder
holding files offline-rl did not write is refused unless ``overwrite=True``, and no existing
file is replaced. ``close()`` (or leaving the ``with`` block, or the process exiting normally)
ends the open episodes as truncated and writes everything buffered.

Examples:
    >>> import tempfile
    >>> from offline_rl.settings.offline_data import OfflineDataConfig
    >>> with ExperienceLogger(OfflineDataConfig(output=tempfile.mkdtemp())) as logger:
    ...     episode = logger.start_episode([0.0, 0.0])
    ...     logger.log_step(episode, action=1, reward=1.0, next_obs=[0.1, 0.0], action_prob=0.9)
    ...     logger.log_step(episode, action=0, reward=1.0, next_obs=[0.2, 0.1], action_prob=0.6,
    ...                     terminated=True)
    >>> logger.counts()
    {'episodes_open': 0, 'episodes_written': 1, 'steps_written': 2, 'empty_episodes': 0}
"""

from __future__ import annotations

import atexit
import math
import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError, OutputError
from offline_rl.filesystems import resolve_filesystem
from offline_rl.recording.json_writer import JsonWriter
from offline_rl.recording.logged_values import ARRAY, FLAG, INFO, NUMBER, ValueLayout
from offline_rl.recording.output_folder import claim_output_folder, new_run_id
from offline_rl.recording.sample_batch_builder import episode_to_sample_batch
from offline_rl.recording.writer import EpisodeWriter, output_location
from offline_rl.settings.offline_data import OfflineDataConfig

#: Episodes that may be open at once, by default.
MAX_OPEN_EPISODES = 10_000
#: The keys values are checked under (``log_step``'s arguments): the observations share a layout.
OBS, NEXT_OBS, ACTION = "obs", "next_obs", "action"
#: What each of ``log_step``'s values is (the model outputs and observations: arrays).
STEP_KINDS = {"reward": NUMBER, "terminated": FLAG, "truncated": FLAG, "info": INFO,
              "action_prob": NUMBER, "action_logp": NUMBER}


class ExperienceLogger:
    """Logs an application's episodes into ``offline_data.output`` (see the module docstring);
    ``name`` names the subfolder of the Parquet and tabular layouts (SampleBatch JSON files go
    directly into ``output``, where RLlib's ``JsonReader`` looks). The spaces, when given, are
    stored with each episode and each observation's and action's shape is checked against
    them."""

    def __init__(self, offline_data: OfflineDataConfig, *, name: str = "app",
                 sample_batches: bool = False, observation_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, overwrite: bool = False,
                 max_open_episodes: int = MAX_OPEN_EPISODES):
        _check_options(offline_data, sample_batches)
        filesystem = resolve_filesystem(offline_data.output_filesystem,
                                        offline_data.output_filesystem_kwargs,
                                        field="output_filesystem")
        run_id = new_run_id()
        self._writer: EpisodeWriter | JsonWriter
        if sample_batches:
            self._writer = JsonWriter(
                offline_data.output, max_file_size=offline_data.output_max_file_size,
                compress_columns=offline_data.output_compress_columns,
                max_rows_per_file=offline_data.output_max_rows_per_file, overwrite=overwrite,
                filesystem=filesystem, run_id=run_id)
        else:
            fs, folder = output_location(offline_data.output, filesystem)
            claim_output_folder(offline_data.output, fs, folder, writer="ExperienceLogger",
                                overwrite=overwrite, replaces=False)
            self._writer = EpisodeWriter(
                offline_data.output, env_name=name, run_id=run_id,
                write_episodes=offline_data.output_write_episodes,
                max_rows_per_file=offline_data.output_max_rows_per_file,
                max_file_size=offline_data.output_max_file_size,
                compress_columns=offline_data.output_compress_columns,
                write_method=offline_data.output_write_method,
                write_method_kwargs=offline_data.output_write_method_kwargs, filesystem=fs)
        self.output = offline_data.output
        self.observation_space = observation_space
        self.action_space = action_space
        spaces = {OBS: observation_space, ACTION: action_space}
        self._layout = ValueLayout({key: space for key, space in spaces.items() if space},
                                   shared={NEXT_OBS: OBS})
        self.max_open_episodes = max_open_episodes
        self._open: dict[str, SingleAgentEpisode] = {}
        self._extra_names: frozenset[str] | None = None
        self._lock = threading.Lock()
        self._closed = False
        #: Why logging stopped: a write failed (``None``: it did not).
        self._failure: str | None = None
        self._counts = {"episodes_written": 0, "steps_written": 0, "empty_episodes": 0}
        #: Episodes and steps in complete files, listed in the manifest.
        self._on_disk = (0, 0)
        atexit.register(self.close)

    def start_episode(self, obs: Any, info: dict | None = None, *,
                      episode_id: str | None = None) -> str:
        """Opens an episode at its first observation; returns its id (``episode_id``, or a new
        unique one)."""
        episode = SingleAgentEpisode(episode_id, observation_space=self.observation_space,
                                     action_space=self.action_space, len_lookback_buffer=0)
        with self._lock:
            self._check_open()
            layouts = self._layout.check({OBS: ARRAY, "info": INFO}, {OBS: obs, "info": info},
                                         f"episode {episode.id_!r}, start_episode")
            episode.add_env_reset(obs, info)
            if episode.id_ in self._open:
                raise DataFormatError(f"episode {episode.id_!r} is already open; each episode "
                                      "needs its own id")
            if len(self._open) >= self.max_open_episodes:
                raise OutputError(
                    f"ExperienceLogger: {len(self._open)} episodes are open, the most allowed "
                    "(max_open_episodes); end episodes (end_episode) as their sessions end, or "
                    "raise max_open_episodes")
            self._open[episode.id_] = episode
            self._layout.keep(layouts)
        return episode.id_

    def log_step(self, episode_id: str, action: Any, reward: float, next_obs: Any, *,
                 terminated: bool = False, truncated: bool = False, info: dict | None = None,
                 action_prob: float | None = None, action_logp: float | None = None,
                 extra_model_outputs: dict[str, Any] | None = None) -> None:
        """Logs one step of an open episode: the action taken (chosen with probability
        ``action_prob`` or log-probability ``action_logp``; give one or both), the reward and
        next observation that followed, and its done flags: a terminated or truncated step
        completes the episode. ``extra_model_outputs`` (``vf_preds``, ...) must name the same
        outputs at every step. Each value is checked as it is logged (see
        ``offline_rl.recording.logged_values``): a step that does not fit is refused with a
        ``DataFormatError`` naming the value and the step, and nothing of it is kept."""
        extras = dict(extra_model_outputs or {})
        with self._lock:
            self._check_open()
            episode = self._episode(episode_id)
            where = f"episode {episode_id!r}, step {len(episode)}"
            values = {NEXT_OBS: next_obs, ACTION: action, "reward": reward,
                      "terminated": terminated, "truncated": truncated, "info": info,
                      **({} if action_prob is None else {"action_prob": action_prob}),
                      **({} if action_logp is None else {"action_logp": action_logp}),
                      **{f"extra_model_outputs[{name!r}]": value
                         for name, value in extras.items()}}
            layouts = self._layout.check(STEP_KINDS, values, where)
            if not math.isfinite(reward):
                raise DataFormatError(f"{where}: reward {reward} is not finite")
            extras.update(_propensities(where, action_prob, action_logp))
            if self._extra_names is not None and frozenset(extras) != self._extra_names:
                raise DataFormatError(
                    f"{where}: the step logs the model outputs {sorted(extras)}, earlier steps "
                    f"{sorted(self._extra_names)}; log the same ones every step")
            self._extra_names = frozenset(extras)
            self._layout.keep(layouts)
            episode.add_env_step(next_obs, action, reward, info, terminated=terminated,
                                 truncated=truncated, extra_model_outputs=extras)
            if episode.is_done:
                self._finish(self._open.pop(episode_id))

    def end_episode(self, episode_id: str) -> None:
        """Ends an open episode whose last step was neither terminated nor truncated (the
        session ended): it is written as truncated. An episode without steps is not written
        (``counts()["empty_episodes"]``)."""
        with self._lock:
            self._check_open()
            self._episode(episode_id)
            self._end(self._open.pop(episode_id))

    def flush(self) -> list[str]:
        """Writes every finished episode buffered so far; returns the paths written so far."""
        with self._lock:
            return self._flush()

    def counts(self) -> dict[str, int]:
        """Episodes open, episodes and steps written (or buffered to be), and episodes ended
        without any step (not written)."""
        with self._lock:
            return {"episodes_open": len(self._open), **self._counts}

    def close(self) -> list[str]:
        """Ends every open episode as truncated, writes everything and returns the paths of
        all files written. Logging after ``close`` is an error. After a write failed, only
        returns the paths of the files written before."""
        with self._lock:
            if self._failure is None and not self._closed:
                for episode in list(self._open.values()):
                    self._end(episode)
                self._open.clear()
                self._closed = True
                atexit.unregister(self.close)
            if self._failure is not None:
                return self._files()
            return self._write(self._writer.close) if isinstance(self._writer, JsonWriter) \
                else self._flush()

    def __enter__(self) -> ExperienceLogger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _episode(self, episode_id: str) -> SingleAgentEpisode:
        if episode_id not in self._open:
            raise DataFormatError(f"episode {episode_id!r} is not open: it was never started, "
                                  "or it ended already (a terminated or truncated step ends it)")
        return self._open[episode_id]

    def _end(self, episode: SingleAgentEpisode) -> None:
        if len(episode):
            episode.is_truncated = True
            self._finish(episode)
        else:
            self._counts["empty_episodes"] += 1

    def _finish(self, episode: SingleAgentEpisode) -> None:
        writer = self._writer
        if isinstance(writer, JsonWriter):
            self._write(lambda: writer.write(episode_to_sample_batch(episode)), episode)
        else:
            self._write(lambda: writer.add([episode.to_numpy()]), episode)

    def _flush(self) -> list[str]:
        self._write(self._writer.flush)
        return self._files()

    def _files(self) -> list[str]:
        output = self._writer.path if isinstance(self._writer, JsonWriter) else \
            self._writer.output
        return [f"{output}/{path}" for path in self._writer.files_written]

    def _write(self, write: Callable[[], Any], episode: SingleAgentEpisode | None = None) -> Any:
        """``write()``, counting ``episode`` (the one it writes, if any) and what is on disk
        once a file is complete; a write that fails (a full disk, a folder that cannot be
        written) stops the logger with an ``OutputError`` saying what is safe on disk."""
        files = len(self._writer.files_written)
        try:
            result = write()
        except OSError as error:
            if isinstance(error, OutputError):  # a JsonWriter's own failure carries the cause
                if not isinstance(error.__cause__, OSError):
                    raise
                error = error.__cause__
            raise self._stop(error, lost=1 if episode is not None else 0) from error
        if episode is not None:
            self._counts["episodes_written"] += 1
            self._counts["steps_written"] += len(episode)
        if len(self._writer.files_written) > files:  # every episode given so far is in them
            self._on_disk = (self._counts["episodes_written"], self._counts["steps_written"])
        return result

    def _stop(self, error: OSError, lost: int) -> OutputError:
        """Stops logging after ``error``: the file being written is dropped, the counts are
        what is on disk, and the error says so."""
        if isinstance(self._writer, JsonWriter):
            self._writer.abandon()
        lost += self._counts["episodes_written"] - self._on_disk[0]
        self._counts["episodes_written"], self._counts["steps_written"] = self._on_disk
        self._failure = (
            f"writing into {self.output!r} failed ({type(error).__name__}: {error}). "
            f"{self._on_disk[0]} episode(s) ({self._on_disk[1]} steps) are safe on disk, in the "
            f"{len(self._writer.files_written)} file(s) written before (listed in the folder's "
            f"manifest); {lost} episode(s) finished after them were not written, nor "
            f"{len(self._open)} still open. Free space (or make the folder writable), then log "
            "on with a new ExperienceLogger (into the same folder, if you like)")
        atexit.unregister(self.close)
        return OutputError(f"ExperienceLogger: {self._failure}")

    def _check_open(self) -> None:
        if self._failure is not None:
            raise OutputError(f"ExperienceLogger stopped logging: {self._failure}")
        if self._closed:
            raise OutputError("ExperienceLogger is closed; make a new one to log more")


def _check_options(offline_data: OfflineDataConfig, sample_batches: bool) -> None:
    """Raises ``ConfigError`` for bad ``output*`` options or a layout they cannot write."""
    problems = [f"{field}: {problem}" for field, problem in offline_data.problems()
                if field.startswith("output")]
    if not offline_data.output:
        problems.append("output: set the folder (path or URI) to log into")
    if sample_batches and (offline_data.output_write_episodes
                           or offline_data.output_write_method != "write_json"):
        problems.append("sample_batches=True writes SampleBatch JSON lines: set "
                        "output_write_episodes=False and output_write_method='write_json'")
    if sample_batches and offline_data.output_write_method_kwargs:
        problems.append("output_write_method_kwargs: SampleBatch JSON takes none (got "
                        f"{sorted(offline_data.output_write_method_kwargs)})")
    if problems:
        raise ConfigError("ExperienceLogger: " + "; ".join(problems))


def _propensities(where: str, action_prob: float | None,
                  action_logp: float | None) -> dict[str, float]:
    """Both propensity columns from whichever was given; an action needs one, finite, and a
    probability above 0."""
    if action_prob is None and action_logp is None:
        raise DataFormatError(f"{where}: give action_prob or action_logp, the "
                              "probability with which the action was chosen (off-policy "
                              "estimation needs it; 1.0 for a deterministic choice)")
    prob = math.exp(action_logp) if action_prob is None else float(action_prob)
    logp = math.log(prob) if action_logp is None and prob > 0 else action_logp
    if not (prob > 0 and math.isfinite(prob) and logp is not None and math.isfinite(logp)):
        raise DataFormatError(f"{where}: action_prob={action_prob}, action_logp="
                              f"{action_logp}: a logged action's probability must be finite "
                              "and above 0")
    return {Columns.ACTION_PROB: np.float32(prob), Columns.ACTION_LOGP: np.float32(logp)}
