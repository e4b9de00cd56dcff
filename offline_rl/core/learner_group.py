"""``LearnerGroup``: an algorithm's learners, in the driver or as Ray actors, trained together."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from offline_rl.core.learner_config import LearnerConfig
from offline_rl.core.learner_worker import LearnerWorker
from offline_rl.core.state_file import load_state_file
from offline_rl.data.feed.learner_feed import FeedStream
from offline_rl.data.pipeline.training_data import TrainingData
from offline_rl.data.ray.actors import kill_actors
from offline_rl.data.source.data_config import DataConfig
from offline_rl.errors import OfflineRLError, ResourceError, warn_at_caller
from offline_rl.placement import check_fits, scheduling_options, usable_resources
from offline_rl.settings.resource_plan import ResourcePlan

#: Seconds to wait for the cluster to place the learners before giving up with an error.
PLACEMENT_TIMEOUT_S = 60
#: Seconds to wait, after a learner fails, for the others to report whether one of them died.
DEATH_GRACE_S = 10


class LearnerDiedError(OfflineRLError, RuntimeError):
    """A remote learner's process died; the other learners were stopped."""


class LearnerGroup:
    """Trains ``num_learners`` learners on ``offline_data`` and keeps their weights identical.

    ``num_learners=0``: one learner in this process, reading ``offline_data.feeds(0)``.
    ``num_learners=N``: N ``LearnerWorker`` actors placed by a placement group
    (``placement_strategy``, with ``num_cpus_per_learner``/``num_gpus_per_learner`` each), each
    consuming its own ``streaming_split`` shard (``offline_data.feeds(N)``, created once, with
    the learners' nodes as locality hints) and averaging gradients with ``torch.distributed``.
    ``train()`` returns one figures dict per learner. A learner that dies raises
    ``LearnerDiedError`` naming it.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig, OfflineData
        >>> config = (BCConfig().environment("CartPole-v1").offline_data(input_=str(cartpole_data))
        ...           .training(train_batch_size_per_learner=256)
        ...           .offline_data(dataset_num_iters_per_learner=5))
        >>> spaces = (gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))
        >>> data = OfflineData(config.data_config(spaces), spaces)
        >>> group = LearnerGroup(config.learner_config(config.get_rl_module_spec(*spaces)), data)
        >>> [figures["num_updates"] for figures in group.train()]
        [5]
        >>> group.stop(); data.stop()
    """

    def __init__(self, config: LearnerConfig, offline_data: TrainingData, *,
                 resources: ResourcePlan | None = None):
        module_spec = config.module_spec
        self.config = config
        self.offline_data = offline_data
        self.num_learners = config.learners.num_learners
        self._placement_group = None
        self._local: LearnerWorker | None = None
        self._actors: list[ray.actor.ActorHandle] = []
        self._module = None
        self._module_steps = -1
        #: Optimizer steps taken so far.
        self.num_steps = 0
        #: The CPUs and GPUs of the run (``ResourcePlan.of_learners`` when not given: the
        #: learners alone).
        self.resources = resources or ResourcePlan.of_learners(
            config.learners, config.offline_data, usable_resources())
        if self.num_learners == 0:
            feed = offline_data.start(resources=self.resources).feeds(0)[0]
            self._local = LearnerWorker(config)
            self._local.attach(feed)
            # Opened now: the pipeline builds while the rest of the run does. (Remote learners
            # open theirs at their first train(), after a restore has set where they resume:
            # a streaming_split shard restarts only when all of them do.)
            self._local.open_feed()
            offline_data.learner_handles = [self._local.learner]
        else:
            self._module = module_spec.build()
            try:
                self._start_actors(module_spec)
            except BaseException:
                self.stop()
                raise
        self._publish_weights()

    def _start_actors(self, module_spec: Any) -> None:
        config, n = self.config, self.num_learners
        cluster = usable_resources()
        cpus, gpus = self.resources.learners.cpus, self.resources.learners.gpus
        bundle = {name: amount for name, amount in (("CPU", cpus), ("GPU", gpus)) if amount}
        for name, amount in bundle.items():
            check_fits(f"{n} learner(s) x {amount:g} {name}", {name: n * amount},
                       f"lower num_learners or num_{name.lower()}s_per_learner, or add "
                       f"{name}s to the cluster")
        if not gpus and n > cluster.get("CPU", 0):
            raise ResourceError(
                f"num_learners={n} learner processes would share {cluster.get('CPU', 0):g} CPUs "
                "(each runs torch and its own data stream, so at most one per CPU makes "
                "progress); Ray would start them all and wait. Lower num_learners to at most "
                "the CPU count, or add CPUs or GPUs.")
        options: list[dict[str, Any]] = [scheduling_options()] * n
        if bundle and not options[0]:  # in a Tune trial, the trial's group holds them
            self._placement_group = placement_group([bundle] * n,
                                                    strategy=config.learners.placement_strategy)
            self._wait_for_placement(bundle)
            options = [{"scheduling_strategy": PlacementGroupSchedulingStrategy(
                self._placement_group, placement_group_bundle_index=rank)} for rank in range(n)]
        elif not options[0] and config.learners.placement_strategy in ("SPREAD", "STRICT_SPREAD"):
            options = [{"scheduling_strategy": "SPREAD"}] * n
        remote_worker = ray.remote(LearnerWorker)
        self._actors = [
            remote_worker.options(num_cpus=cpus, num_gpus=gpus, max_restarts=0,
                                  **options[rank]).remote(config)
            for rank in range(n)
        ]
        self.offline_data.build(resources=self.resources)
        self.offline_data.learner_handles = list(self._actors)
        self.offline_data.locality_hints = self._call_all("node_id")
        feeds = self.offline_data.feeds(n, locality_hints=self.offline_data.locality_hints)
        self._wait([actor.attach.remote(feed) for actor, feed in zip(self._actors, feeds)])
        if n > 1:
            address = self._wait([self._actors[0].free_address.remote()])[0]
            self._wait([actor.join_process_group.remote(address, rank, n)
                        for rank, actor in enumerate(self._actors)])

    def _wait_for_placement(self, bundle: dict[str, float]) -> None:
        ready, _ = ray.wait([self._placement_group.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            self.stop()
            raise ResourceError(
                f"could not place {self.num_learners} learner(s) of {bundle} each with "
                f"strategy {self.config.learners.placement_strategy!r} within "
                f"{PLACEMENT_TIMEOUT_S} s; "
                f"the cluster has {ray.cluster_resources()}. Lower num_learners, "
                "num_cpus_per_learner or num_gpus_per_learner, or use placement_strategy='PACK'.")

    def train(self) -> list[dict[str, Any]]:
        """One training iteration on every learner; their figures, by rank."""
        if self._local is not None:
            results = [self._local.train()]
        else:
            results = self._call_all("train")
        self.num_steps += results[0]["num_optimizer_steps"]
        self._publish_weights()
        return results

    def mix_online(self, data_config: DataConfig) -> None:
        """Every learner mixes ``data_config.sampler_weight`` of online rows into its batches
        (``LearnerWorker.mix_online``), from the episodes ``add_online_episodes`` hands it."""
        if self._local is not None:
            self._local.mix_online(data_config, 0)
        else:
            self._wait([actor.mix_online.remote(data_config, rank)
                        for rank, actor in enumerate(self._actors)])

    def add_online_episodes(self, episode_states: list[dict[str, Any]]) -> None:
        """Hands every learner the sampler's new episodes (each samples its own batches)."""
        if self._local is not None:
            self._local.add_online_episodes(episode_states)
        else:
            self._call_all("add_online_episodes", ray.put(episode_states))

    def loss_metrics(self, batches: list[dict[str, np.ndarray]]) -> dict[str, float]:
        """Learner 0's loss metrics on ``batches`` (all learners hold the same weights),
        without a step."""
        if self._local is not None:
            return self._local.loss_metrics(batches)
        return self._wait([self._actors[0].loss_metrics.remote(batches)])[0]

    def _call_all(self, method: str, *args: Any) -> list[Any]:
        return self._wait([getattr(actor, method).remote(*args) for actor in self._actors])

    def _wait(self, refs: list[ray.ObjectRef]) -> list[Any]:
        """The results of one call per learner. On the first failure every learner is stopped
        (the others would wait for it in the gradient all-reduce) and the error is raised; a
        learner whose process died is named in a ``LearnerDiedError``."""
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                ray.get(done[0])
            except Exception as error:
                # A death also breaks the others' all-reduce: give their errors a moment to
                # arrive, and report the learner that died rather than one of its peers.
                failed = ray.wait(pending, num_returns=len(pending),
                                  timeout=DEATH_GRACE_S)[0] if pending else []
                rank, error = self._died(refs, [done[0], *failed]) or (refs.index(done[0]), error)
                self._kill_actors()
                if isinstance(error, ray.exceptions.RayActorError):
                    raise LearnerDiedError(
                        f"learner {rank} of {self.num_learners} (Ray actor {error.actor_id}) "
                        "died; the other learners were stopped. Rebuild the algorithm, or "
                        "restore it from its last checkpoint (Algorithm.from_checkpoint). "
                        f"Ray's report: {error}") from error
                raise error
        return ray.get(refs)

    @staticmethod
    def _died(refs: list[ray.ObjectRef],
              finished: list[ray.ObjectRef]) -> tuple[int, Exception] | None:
        """The rank and error of the first learner among ``finished`` whose actor died."""
        for ref in finished:
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as error:
                return refs.index(ref), error
            except Exception:
                continue
        return None

    @property
    def module(self) -> Any:
        """The trained module: the local learner's, or a CPU copy of learner 0's weights."""
        if self._local is not None:
            return self._local.learner.module
        if self._module_steps != self.num_steps:
            weights = self._wait([self._actors[0].get_weights.remote()])[0]
            self._module.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
            self._module_steps = self.num_steps
        return self._module

    def _publish_weights(self) -> None:
        if self.offline_data.needs_module:
            weights = (self._local.get_weights() if self._local is not None
                       else self._wait([self._actors[0].get_weights.remote()])[0])
            self.offline_data.publish_weights(weights, self.num_steps)

    def save_state(self, path: str | Path) -> None:
        """Writes learner 0's module and optimizer state to ``path`` (a torch file)."""
        if self._local is not None:
            self._local.learner.save_state(path)
        else:
            torch.save(self._wait([self._actors[0].get_state.remote()])[0], path)

    def load_state(self, path: str | Path, num_steps: int | None, *,
                   module_only: bool = False) -> None:
        """Loads a state written by ``save_state`` into every learner (tensors only): module
        weights and optimizer state, or the weights only; ``num_steps`` sets the step count
        (``None`` keeps it)."""
        state = load_state_file(path)
        if module_only:
            state = {"module": state["module"]}
        if num_steps is not None:
            self.num_steps = num_steps
        num_steps = self.num_steps
        if self._local is not None:
            self._local.set_state(state, num_steps)
        else:
            self._call_all("set_state", state, num_steps)
            self._module_steps = -1
        self._publish_weights()

    @property
    def stream(self) -> FeedStream | None:
        """The stream of the learner in this process (``None`` with remote learners)."""
        return None if self._local is None else self._local.open_feed()

    def wait_for_data(self) -> None:
        """Returns once every learner's stream has its first batch (or has failed)."""
        if self._local is not None:
            self._local.wait_for_data()
        else:
            self._call_all("wait_for_data")

    def data_position(self) -> dict[str, Any] | None:
        """Where the learners' streams stand, for a checkpoint: the local learner's
        ``FeedStream.saved_position()``, or ``{"learners": [...]}``, one per remote learner
        (``None`` when none can say)."""
        if self._local is not None:
            return self._local.position()
        positions = self._call_all("position")
        return None if all(position is None for position in positions) else {
            "learners": positions}

    def resume_data(self, saved: Mapping[str, Any]) -> None:
        """Every learner reads on from where ``data_position()`` said it stood. A position of
        another number of learners cannot be split among these: their streams then start
        afresh, with one warning saying so."""
        saved_learners = len(saved["learners"]) if "learners" in saved else 0
        if saved_learners != self.num_learners:
            warn_at_caller(f"the checkpoint's data position is of num_learners={saved_learners}"
                           f", and this run has num_learners={self.num_learners}: the data "
                           "streams start afresh (resume with the checkpoint's num_learners "
                           "to read on where they stood)")
        elif self._local is not None:
            self._local.resume(saved)
        else:
            self._wait([actor.resume.remote(position)
                        for actor, position in zip(self._actors, saved["learners"])
                        if position is not None])

    def stop(self) -> None:
        """Stops the learners (and their data streams) and frees their placement group."""
        if self._local is not None:
            self._local.stop()
        if self._actors:
            ray.wait([actor.stop.remote() for actor in self._actors], num_returns=len(
                self._actors), timeout=30)
            self._kill_actors()
        if self._placement_group is not None:
            remove_placement_group(self._placement_group)
            self._placement_group = None

    def _kill_actors(self) -> None:
        kill_actors(self._actors)
        self._actors = []

