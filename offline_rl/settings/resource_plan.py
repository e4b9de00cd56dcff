"""``ResourcePlan``: the CPUs and GPUs of everything a run starts, decided once from the config's
sections (after RLlib's ``default_resource_request``).

A run holds its driver process (its local learner, its in-process evaluation), the data
pipeline (a read task and the PreLearner actor pool), remote learners, and runner actors:
evaluation's env runners, RLlib's offline evaluation runners (with their own small pipeline),
the sampler's env runners (``"sampler"`` in ``input_``) and the recorder's (``evaluate()``
with ``offline_data(output=...)``). ``ResourcePlan.of`` sizes them for the cluster when the
algorithm is built, and each part reads its numbers there: the PreLearner pool is sized
beside all the others (``beside_pipeline``), the learners beside the runners. CPU options
left at ``"auto"`` take 1 CPU where that fits and 0 (sharing the CPUs) where it does not,
with one warning saying so; numbers the user gives are kept. ``ResourcePlan.requested`` is
what a Tune trial reserves before it starts (``"auto"`` counted as 1 CPU), as ``bundles()``.

Examples:
    >>> from offline_rl import BCConfig
    >>> plan = ResourcePlan.requested(BCConfig().evaluation(evaluation_num_env_runners=2)
    ...                               .sections)
    >>> plan.evaluation_runners, plan.bundles()
    (Actors(count=2, cpus=1.0, gpus=0.0), [{'CPU': 1.0}, {'CPU': 4.0}])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from offline_rl.errors import warn_at_caller
from offline_rl.placement import usable_resources

#: A CPU option offline-rl sizes to what Ray offers.
AUTO = "auto"
#: CPUs a Ray Data read task holds while the pool runs.
READ_TASK_CPUS = 1.0
#: CPUs the data pipeline holds at its smallest by default: a read task, one 1-CPU PreLearner.
PIPELINE_CPUS = READ_TASK_CPUS + 1.0
#: How many pipelines' share of CPUs the offline evaluation runners' own pipeline takes (its
#: read tasks and its PreLearner actor): a quarter, so that it fits beside training on a
#: 2-CPU machine.
OFFLINE_EVAL_PIPELINE_SHARE = 4
#: CPUs the offline evaluation runners' pipeline holds: a quarter of a pipeline's.
OFFLINE_EVAL_PIPELINE_CPUS = PIPELINE_CPUS / OFFLINE_EVAL_PIPELINE_SHARE


@dataclass(frozen=True)
class Actors:
    """``count`` processes of ``cpus`` CPUs and ``gpus`` GPUs each."""

    count: int = 0
    cpus: float = 0.0
    gpus: float = 0.0

    @property
    def total_cpus(self) -> float:
        return self.count * self.cpus


@dataclass(frozen=True)
class ResourcePlan:
    """What each part of a run holds (see the module docstring); ``learners`` are the remote
    learners (none: one learner in the driver), ``pool`` the PreLearner actors at most."""

    main: Actors = Actors()
    pool: Actors = Actors()
    learners: Actors = Actors()
    evaluation_runners: Actors = Actors()
    offline_eval_runners: Actors = Actors()
    #: The offline evaluation runners' own pipeline (0 without them).
    offline_eval_pipeline_cpus: float = 0.0
    sampler_runners: Actors = Actors()
    recorder_runners: Actors = Actors()

    @property
    def beside_pipeline(self) -> float:
        """The CPUs the run holds beside the data pipeline (the recorder's runners start
        later, in what is left): what the PreLearner pool is sized beside."""
        return (self.learners.total_cpus + self.evaluation_runners.total_cpus
                + self.offline_eval_runners.total_cpus + self.offline_eval_pipeline_cpus
                + self.sampler_runners.total_cpus)

    @classmethod
    def of(cls, sections: Any, cluster: Mapping[str, float] | None = None) -> ResourcePlan:
        """The plan of ``sections`` (a config's ``sections``) for ``cluster`` (its usable
        resources; default ``usable_resources()``): options at ``"auto"`` sized to fit."""
        cluster = usable_resources() if cluster is None else cluster
        counts = _runner_counts(sections, plays_env=sections.environment.env is not None)
        runners, evaluation = sections.env_runners, sections.evaluation
        recorder = Actors()
        if counts["recorder"]:
            recorder = Actors(counts["recorder"], env_runner_cpus(
                runners.num_cpus_per_env_runner, counts["recorder"], PIPELINE_CPUS))
        evaluation_runners = Actors(counts["evaluation"], env_runner_cpus(
            runners.num_cpus_per_env_runner, counts["evaluation"]))
        offline_eval, offline_eval_pipeline = Actors(), 0.0
        if evaluation.evaluates_training_input():
            offline_eval_pipeline = OFFLINE_EVAL_PIPELINE_CPUS
            offline_eval = Actors(counts["offline_eval"], offline_eval_runner_cpus(
                evaluation, beside=PIPELINE_CPUS + offline_eval_pipeline))
        sampler = Actors()
        if counts["sampler"]:
            sampler = Actors(counts["sampler"], env_runner_cpus(runners.num_cpus_per_env_runner,
                                                                counts["sampler"]))
        held = (evaluation_runners.total_cpus + offline_eval.total_cpus + offline_eval_pipeline
                + sampler.total_cpus)
        learners = cls.of_learners(sections.learners, sections.offline_data,
                                   {**cluster, "CPU": cluster.get("CPU", 0) - held}).learners
        return cls(_main(sections), _pool(sections.offline_data), learners, evaluation_runners,
                   offline_eval, offline_eval_pipeline, sampler, recorder)

    @classmethod
    def of_learners(cls, learners: Any, offline_data: Any,
                    cluster: Mapping[str, float]) -> ResourcePlan:
        """The plan of the remote learners alone (``learners``, an ``offline_data`` section's
        pool beside them) in ``cluster``: for learners started without a run around them."""
        cpus = learner_cpus(learners.num_cpus_per_learner, learners.num_learners,
                            learners.num_gpus_per_learner, offline_data.map_batches_kwargs,
                            cluster) if learners.num_learners else 0.0
        return cls(learners=Actors(learners.num_learners, cpus, learners.num_gpus_per_learner))

    @classmethod
    def requested(cls, sections: Any) -> ResourcePlan:
        """The most ``sections`` ask for, before any cluster is known: each CPU option left at
        ``"auto"`` counted as 1 CPU (a learner with a GPU as 0), the pool at its largest, and
        the env runners as if the trial plays an env."""
        counts = _runner_counts(sections, plays_env=True)
        runner_cpus = _auto_as_one(sections.env_runners.num_cpus_per_env_runner)
        learners = sections.learners
        learner_cpus = learners.num_cpus_per_learner
        if learner_cpus == AUTO:
            learner_cpus = 0.0 if learners.num_gpus_per_learner else 1.0
        evaluation = sections.evaluation
        offline_eval = evaluation.evaluates_training_input()
        return cls(
            _main(sections), _pool(sections.offline_data),
            Actors(learners.num_learners, float(learner_cpus), learners.num_gpus_per_learner),
            Actors(counts["evaluation"], runner_cpus),
            Actors(counts["offline_eval"],
                   _auto_as_one(evaluation.num_cpus_per_offline_eval_runner)),
            OFFLINE_EVAL_PIPELINE_CPUS if offline_eval else 0.0,
            Actors(counts["sampler"], runner_cpus), Actors(counts["recorder"], runner_cpus))

    def bundles(self) -> list[dict[str, float]]:
        """A Tune trial's placement group: the driver process (with the local learner's GPU),
        then one bundle for the read task, the pool and every remote learner and runner;
        amounts rounded to Ray's granularity, 1e-4."""
        main = {"CPU": self.main.cpus,
                "GPU": 0.0 if self.learners.count else self.learners.gpus}
        work = {"CPU": READ_TASK_CPUS + self.pool.total_cpus + self.beside_pipeline
                + self.recorder_runners.total_cpus,
                "GPU": self.pool.count * self.pool.gpus
                + self.learners.count * self.learners.gpus}
        bundles = [{name: round(float(amount), 4) for name, amount in bundle.items() if amount}
                   for bundle in (main, work)]
        return [bundle for bundle in bundles if bundle]


def _runner_counts(sections: Any, plays_env: bool) -> dict[str, int]:
    """The runner actors of each kind the run starts: evaluation's env runners, when it
    ``plays_env`` (unless evaluation records, with the recorder's), RLlib's offline evaluation
    runners, the sampler's."""
    records = plays_env and bool(sections.offline_data.output)
    evaluation, runners = sections.evaluation, sections.env_runners
    return {
        "evaluation": evaluation.evaluation_num_env_runners if plays_env and not records else 0,
        "recorder": max(1, evaluation.evaluation_num_env_runners or runners.num_env_runners)
        if records else 0,
        "offline_eval": evaluation.num_offline_eval_runners
        if evaluation.evaluates_training_input() else 0,
        "sampler": runners.runner_actors if sections.offline_data.input_spec.sampler_share
        else 0,
    }


def _main(sections: Any) -> Actors:
    """The driver process: ``num_cpus_for_main_process`` (``"auto"``: 1)."""
    return Actors(1, _auto_as_one(sections.resources.num_cpus_for_main_process))


def _pool(offline_data: Any) -> Actors:
    """The PreLearner pool at its largest (``"auto"`` CPUs counted as 1)."""
    pool = offline_data.map_batches_kwargs
    _, largest = pool_range(pool.get("concurrency", 1))
    return Actors(largest, _auto_as_one(pool.get("num_cpus", AUTO)),
                  float(pool.get("num_gpus", 0) or 0))


def _auto_as_one(value: float | str) -> float:
    return 1.0 if value == AUTO else float(value)


def env_runner_cpus(requested: float | str, num_runners: int,
                    beside: float = PIPELINE_CPUS, *, option: str = "num_cpus_per_env_runner",
                    runners: str = "env runners") -> float:
    """CPUs per env runner (or other runner actor, whose CPU ``option`` and name ``runners``
    the warning gives): ``requested``, or for ``"auto"`` 1 when ``num_runners`` of them
    fit in the usable CPUs beside ``beside`` CPUs (what else the run holds: by default the
    data pipeline), else 0: the runners then share the CPUs, with a warning saying so.

    Examples:
        >>> env_runner_cpus("auto", 2, beside=0), env_runner_cpus(0.5, 2)   # on 2 CPUs
        (1.0, 0.5)
    """
    if requested != AUTO:
        return float(requested)
    usable = usable_resources().get("CPU", 0.0)
    if not num_runners or num_runners + beside <= usable:
        return 1.0
    warn_at_caller(f"{runners} share the CPUs ({option}='auto'): {num_runners} x 1 CPU do not "
                   f"fit beside the {beside:g} the rest of the run holds, in {usable:g}. Set "
                   f"{option} to choose.")
    return 0.0


def offline_eval_runner_cpus(evaluation: Any, beside: float) -> float:
    """CPUs per remote offline evaluation runner of an ``evaluation`` section:
    ``num_cpus_per_offline_eval_runner``, or for ``"auto"`` 1 where ``num_offline_eval_runners``
    of them fit beside ``beside`` CPUs, else 0 (shared)."""
    return env_runner_cpus(evaluation.num_cpus_per_offline_eval_runner,
                           evaluation.num_offline_eval_runners, beside=beside,
                           option="num_cpus_per_offline_eval_runner",
                           runners="offline evaluation runners")


def learner_cpus(requested: float | str, num_learners: int, num_gpus_per_learner: float,
                 map_batches_kwargs: Mapping[str, Any],
                 cluster_resources: Mapping[str, float]) -> float:
    """CPUs each remote learner reserves. ``"auto"``: 0 with a GPU; else 1 when every learner's
    CPU fits beside the smallest PreLearner pool and a read task, else 0 (the learners then
    share CPUs with the data pipeline instead of starving it).

    Examples:
        >>> learner_cpus("auto", 2, 0, {}, {"CPU": 2}), learner_cpus("auto", 2, 0, {}, {"CPU": 8})
        (0.0, 1.0)
    """
    if requested != AUTO:
        return float(requested)
    if num_gpus_per_learner:
        return 0.0
    minimum, _ = pool_range(map_batches_kwargs.get("concurrency", 1))
    pool = minimum * float(map_batches_kwargs.get("num_cpus", 1))
    fits = num_learners + pool + READ_TASK_CPUS <= float(cluster_resources.get("CPU", 0))
    return 1.0 if fits else 0.0


def pool_range(concurrency: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    """``concurrency`` (an int, or a ``(min, max)`` autoscaling range) as ``(min, max)``."""
    if isinstance(concurrency, tuple | list):
        return concurrency[0], concurrency[1]
    return concurrency, concurrency
