"""``Recorder``: a policy played in gymnasium envs across Ray actors, written to ``output``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import numpy as np
import ray
from tqdm import tqdm

from offline_rl.data.ray.actors import kill_actors
from offline_rl.data.source.io_context import IOContext
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, OutputError, surface_errors
from offline_rl.evaluation.action_wrappers import env_to_make
from offline_rl.evaluation.env_limits import sampling_limits, warn_cut
from offline_rl.evaluation.rollout import BatchPolicy, make_env, rollout
from offline_rl.filesystems import resolve_filesystem
from offline_rl.placement import check_fits
from offline_rl.recording.input_overlap import overlap_problem
from offline_rl.recording.json_writer import JsonWriter
from offline_rl.recording.output_folder import claim_output_folder, new_run_id, write_failure
from offline_rl.recording.output_writer import OutputWriter
from offline_rl.recording.policies import as_batch_policy
from offline_rl.recording.recorder_config import RecorderConfig
from offline_rl.recording.sample_batch_builder import episode_to_sample_batch
from offline_rl.recording.writer import EpisodeWriter, output_location
from offline_rl.settings.resource_plan import env_runner_cpus
from offline_rl.statistics import episode_statistics

#: Episodes one ``record`` call on a runner plays before reporting progress.
EPISODES_PER_REPORT = 8
#: The gap between the first episode seeds of two env runners (recording, or the sampler's).
RUNNER_SEED_STRIDE = 1_000_003


class Recorder:
    """Records complete episodes of ``policy`` with ``config.env_runners.num_env_runners`` Ray
    actors (one for 0), each stepping ``num_envs_per_env_runner`` envs, written by an
    ``EpisodeWriter`` per actor with the ``output*`` options of ``config.offline_data`` (or,
    when ``output`` is a creator ``(IOContext) -> OutputWriter``, handed to the writer it
    builds per actor, one ``SampleBatch`` per episode; ``stop()`` then returns no files).
    ``record(n)`` shows a progress bar; ``stop()`` flushes what the actors still buffer and
    releases them.

    Each Recorder is a run with its own id in its files' names, so recording again into the
    same folder adds episodes and never replaces earlier ones. An output folder that holds
    files offline-rl did not write is refused (``OutputError``) unless ``overwrite=True``
    (which writes beside them, leaving them untouched); so is an output that is an input of
    the config, is inside one or holds one: ``input_`` or the config's own ``input_`` (the
    training data), or the ``evaluation_input`` (``evaluation_config``'s held-out data; see
    ``input_overlap``), whatever their formats. Each env runner actor takes ``num_cpus``, as
    the run's ``ResourcePlan`` sized them; without, ``num_cpus_per_env_runner="auto"`` gives
    each actor a CPU where all fit, else none.

    Examples:
        >>> import tempfile
        >>> import numpy as np
        >>> from offline_rl.settings.environment import EnvironmentConfig
        >>> from offline_rl.settings.offline_data import OfflineDataConfig
        >>> from offline_rl.settings.resources import EnvRunnersConfig
        >>> config = RecorderConfig(EnvironmentConfig(env="CartPole-v1"),
        ...                         EnvRunnersConfig(num_env_runners=2),
        ...                         OfflineDataConfig(output=tempfile.mkdtemp()))
        >>> always_left = lambda obs: np.zeros(len(obs), dtype=np.int64)
        >>> with Recorder(config, always_left) as recorder:
        ...     stats = recorder.record(4, progress=False)
        ...     files = recorder.stop()
        >>> stats["num_episodes"], stats["episode_return_max"] < 20, len(files)
        (4, True, 2)
    """

    @surface_errors
    def __init__(self, config: RecorderConfig, policy: Any, *, input_: Any = None,
                 evaluation_input: Any = None, overwrite: bool = False,
                 num_cpus: float | None = None):
        check_output(config, input_=input_, evaluation_input=evaluation_input,
                     overwrite=overwrite)
        if config.environment.env is None:
            raise ConfigError("recording needs an env: set config.environment(env=...)")
        runner = ray.remote(num_cpus=checked_env_runner_cpus(config, num_cpus))(_EnvRunner)
        self.config = config
        self.run_id = new_run_id()
        self.runners = [runner.remote(config, policy, index, self.run_id, overwrite)
                        for index in range(config.env_runners.runner_actors)]

    @surface_errors
    def record(self, num_episodes: int, *, policy: Any = None,
               progress: bool = True) -> dict[str, int | float | None]:
        """Records ``num_episodes`` complete episodes, spread over the runners (with ``policy``
        from now on, when given); returns their ``offline_rl.statistics.episode_statistics``."""
        if isinstance(num_episodes, bool) or not isinstance(num_episodes, int | np.integer) \
                or num_episodes < 1:
            raise ConfigError(f"record(num_episodes={num_episodes!r}): give a whole number of "
                              "episodes, at least 1")
        if policy is not None:
            ray.get([runner.set_policy.remote(policy) for runner in self.runners])
        shares = np.diff(np.linspace(0, num_episodes, len(self.runners) + 1).round().astype(int))
        pending: dict[ray.ObjectRef, tuple[Any, int]] = {}
        returns: list[float] = []
        lengths: list[int] = []

        def submit(runner: Any, remaining: int) -> None:
            count = min(EPISODES_PER_REPORT, remaining)
            if count:
                pending[runner.record.remote(count)] = (runner, remaining - count)

        for runner, share in zip(self.runners, shares):
            submit(runner, int(share))
        with tqdm(total=num_episodes, unit="episode",
                  desc=f"recording {self.config.environment.env}", disable=not progress) as bar:
            while pending:
                (done,), _ = ray.wait(list(pending), num_returns=1)
                runner, remaining = pending.pop(done)
                episode_returns, episode_lengths, cut_notice = ray.get(done)
                warn_cut(cut_notice)
                returns += episode_returns
                lengths += episode_lengths
                bar.update(len(episode_returns))
                submit(runner, remaining)
        return episode_statistics(returns, lengths)

    @surface_errors
    def stop(self) -> list[str]:
        """Flushes every runner's buffered episodes; returns all files written; frees actors."""
        try:
            return [path for paths in ray.get([r.stop.remote() for r in self.runners])
                    for path in paths]
        finally:
            kill_actors(self.runners)
            self.runners = []

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.runners:
            self.stop()


def checked_env_runner_cpus(config: RecorderConfig, num_cpus: float | None = None) -> float:
    """CPUs per env runner actor: ``num_cpus`` (a run's ``ResourcePlan``'s), else
    ``num_cpus_per_env_runner`` (``"auto"``: sized to fit, see ``env_runner_cpus``); raises
    ``ResourceError`` when the actors cannot all be placed."""
    runners = config.env_runners
    cpus = (env_runner_cpus(runners.num_cpus_per_env_runner, runners.runner_actors, beside=0.0)
            if num_cpus is None else num_cpus)
    check_fits(f"{runners.runner_actors} env runner(s) x {cpus:g} CPU",
               {"CPU": runners.runner_actors * cpus},
               "lower num_env_runners (evaluation_num_env_runners when evaluate() records) or "
               "num_cpus_per_env_runner (0 shares the CPUs), or add CPUs")
    return cpus


def check_output(config: RecorderConfig, *, input_: Any = None, evaluation_input: Any = None,
                 overwrite: bool = False) -> None:
    """Fails fast, before anything is recorded, with an ``OutputError`` when the ``output``
    location overlaps an input (``input_``, the config's own ``input_``, the
    ``evaluation_input``: is one, is inside one or holds one, see ``input_overlap``), is a
    file, cannot be written (its folder is created), or holds files offline-rl did not write
    (unless ``overwrite``); a ``ConfigError`` without an ``output``."""
    options = config.offline_data
    if not options.output:
        raise ConfigError("recording needs config.offline_data(output=<path or URI>)")
    if callable(options.output):  # a custom writer's creator: it writes where it likes
        return
    overlap = overlap_problem(options.output, {
        "the training input": [input_, options.input_],
        "the evaluation input (evaluation_config['input_'])": evaluation_input})
    if overlap:
        raise OutputError(f"recording: output {options.output!r} {overlap}; recording there "
                          "would mix new episodes with the data trained or evaluated on: "
                          "choose another folder")
    filesystem, folder = output_location(
        options.output, resolve_filesystem(options.output_filesystem,
                                           options.output_filesystem_kwargs,
                                           field="output_filesystem"))
    claim_output_folder(options.output, filesystem, folder, writer="recording",
                        overwrite=overwrite, replaces=False)


class _EnvRunner:
    """One recording actor: its envs (made once, closed by ``stop``), the policy (``None``:
    given by ``set_policy`` before playing), its writer."""

    def __init__(self, config: RecorderConfig, policy: Any, index: int, run_id: str,
                 overwrite: bool = False):
        self.config = config
        self.envs = [make_env(env_to_make(config.environment), config.environment.env_config)
                     for _ in range(config.env_runners.num_envs_per_env_runner)]
        if policy is not None:
            self.set_policy(policy)
        self.index = index
        self.writer = runner_writer(config, index, run_id, overwrite)
        self.files: list[str] = []
        self.episodes_started = 0
        self.limits = sampling_limits(config.env_runners, f"recording env runner {index}")
        #: Whether a write failed (what the runner buffers is then given up).
        self.failed = False

    def set_policy(self, policy: Any) -> None:
        self.policy = as_batch_policy(policy)
        self.on_episode_start: Callable[[int], None] | None = getattr(
            policy, "start_episode", None)

    def record(self, num_episodes: int) -> tuple[list[float], list[int], str | None]:
        episodes = self.play(num_episodes)
        return ([episode.get_return() for episode in episodes], [len(e) for e in episodes],
                self.limits.take_cut()[1])

    def play(self, num_episodes: int, *, steps: int | None = None, cut: bool = False,
             policy: BatchPolicy | None = None) -> list[SingleAgentEpisode]:
        """Plays and writes ``num_episodes`` whole episodes with the runner's policy (or
        ``policy``); returns them. With ``steps``, stops at the first episode that ends once
        that many env steps are played, or with ``cut`` after exactly that many, the episodes
        still running then written cut, ending truncated (see ``rollout``)."""
        seed = self.config.debugging.seed
        first = (None if seed is None
                 else seed + RUNNER_SEED_STRIDE * self.index + self.episodes_started)
        started = 0

        def on_start(number: int) -> None:
            nonlocal started
            started += 1
            if self.on_episode_start is not None and policy is None:
                self.on_episode_start(number)

        episodes: list[SingleAgentEpisode] = []
        for episode in rollout(self.envs, policy or self.policy, num_episodes, seed=first,
                               on_episode_start=on_start, limits=self.limits,
                               max_steps=steps if cut else None):
            try:
                self.files += write_episode(self.writer, episode)
            except OSError as error:
                raise self._write_failure(error) from None
            episodes.append(episode)
            if steps is not None and not cut and sum(map(len, episodes)) >= steps:
                break
        self.episodes_started += started
        return episodes

    def flush(self) -> list[str]:
        """Writes what the runner's ``EpisodeWriter`` buffers into a folder of its own;
        returns the files."""
        if not isinstance(self.writer, EpisodeWriter) or self.failed:
            return []
        try:
            written = self.writer.flush()
        except OSError as error:
            raise self._write_failure(error) from None
        self.files += written
        return written

    def stop(self) -> list[str]:
        try:
            if not self.failed:
                self.files += close_writer(self.writer)
        except OSError as error:
            raise self._write_failure(error) from None
        finally:
            for env in self.envs:
                env.close()
        return self.files

    def _write_failure(self, error: OSError) -> OutputError:
        self.failed = True
        return write_failure(
            f"recording env runner {self.index}", str(self.config.offline_data.output), error,
            kept=f"the {len(self.files)} whole file(s) it wrote before are kept (listed in the "
                 "folder's manifest), the episodes it held since were not written",
            needed_bytes=getattr(self.writer, "buffered_bytes", None))


def write_episode(writer: EpisodeWriter | JsonWriter | OutputWriter,
                  episode: SingleAgentEpisode) -> list[str]:
    """Writes one episode with a ``runner_writer``; returns the files it completed."""
    if isinstance(writer, EpisodeWriter):
        return writer.add([episode])
    writer.write(episode_to_sample_batch(episode))
    return []


def close_writer(writer: EpisodeWriter | JsonWriter | OutputWriter) -> list[str]:
    """Flushes what a ``runner_writer`` buffers; returns the files it completed."""
    if isinstance(writer, EpisodeWriter):
        return writer.flush()
    if isinstance(writer, JsonWriter):
        return writer.close()
    return []


def runner_writer(config: RecorderConfig, index: int, run_id: str, overwrite: bool
                  ) -> EpisodeWriter | JsonWriter | OutputWriter:
    """Recording actor ``index``'s writer: the custom one ``output`` creates, a ``JsonWriter``
    of SampleBatch lines (``output_write_sample_batches``), or an ``EpisodeWriter``."""
    options = config.offline_data
    if callable(options.output):
        return custom_writer(config, index)
    filesystem = resolve_filesystem(options.output_filesystem, options.output_filesystem_kwargs,
                                    field="output_filesystem")
    if options.output_write_sample_batches:
        return JsonWriter(options.output, IOContext(worker_index=index),
                          options.output_max_file_size, options.output_compress_columns,
                          max_rows_per_file=options.output_max_rows_per_file,
                          overwrite=overwrite, filesystem=filesystem, run_id=run_id)
    return EpisodeWriter(
        options.output, env_name=_env_name(config.environment.env), runner_index=index,
        run_id=run_id, write_episodes=options.output_write_episodes,
        max_rows_per_file=options.output_max_rows_per_file,
        max_file_size=options.output_max_file_size,
        compress_columns=options.output_compress_columns,
        write_method=options.output_write_method,
        write_method_kwargs=options.output_write_method_kwargs, filesystem=filesystem)


def custom_writer(config: RecorderConfig, index: int) -> OutputWriter:
    """The writer ``config.offline_data.output`` (a creator ``(IOContext) -> OutputWriter``)
    builds for recording actor ``index``; ``ConfigError`` when it builds no ``OutputWriter``
    (anything with a ``write`` method)."""
    options = config.offline_data
    context = {field.name: getattr(options, field.name) for field in fields(options)}
    writer = options.output(IOContext(config=context, worker_index=index))
    if not callable(getattr(writer, "write", None)):
        raise ConfigError(f"output={options.output!r} returned {type(writer).__name__}, not an "
                          "OutputWriter (an object with write(sample_batch))")
    return writer


def _env_name(env: Any) -> str:
    return env if isinstance(env, str) else getattr(env, "__name__", "env")
