"""``LearnerWorker``: one learner and the stream of batches it trains on, in the driver or in a
Ray actor; ``train()`` is one training iteration of that learner."""

from __future__ import annotations

import datetime
import socket
from collections.abc import Mapping
from typing import Any

import numpy as np
import ray
import torch
import torch.distributed as dist

from offline_rl.core.learner_config import LearnerConfig
from offline_rl.data.feed.batch_stream import StreamStats
from offline_rl.data.feed.learner_feed import FeedStream, LearnerFeed
from offline_rl.data.feed.online_rows import OnlineRows
from offline_rl.data.prelearner.module_weights import WEIGHTS_VERSION, numpy_state
from offline_rl.data.source.data_config import DataConfig

#: Seconds a learner waits for the others in a collective (joining, or their gradients while
#: their data is still being read). A learner that dies is caught sooner by ``LearnerGroup``.
PROCESS_GROUP_TIMEOUT_S = 1800


class LearnerWorker:
    """Runs ``dataset_num_iters_per_learner`` updates (``None``: one epoch of its data) per
    ``train()`` and reports what it did.

    ``LearnerGroup`` makes one in the driver (``num_learners=0``), or one per Ray actor joined
    to a ``torch.distributed`` process group so all learners take the same averaged step; each
    trains on the ``LearnerFeed`` it is ``attach``ed to (``OfflineData.feeds``), opened at the
    first ``train()`` (or ``open_feed()``) from where ``resume`` says, and says where it stands
    (``position``) for a checkpoint.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig, OfflineData
        >>> config = (BCConfig().environment("CartPole-v1").offline_data(input_=str(cartpole_data))
        ...           .training(train_batch_size_per_learner=256))
        >>> spaces = (gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))
        >>> spec = config.get_rl_module_spec(*spaces)
        >>> worker = LearnerWorker(config.learner_config(spec))
        >>> data = OfflineData(config.data_config(spaces), spaces)
        >>> worker.attach(data.start().feeds(0)[0])
        >>> worker.train()["num_updates"] > 10   # one epoch of about 20k rows
        True
        >>> worker.position()["epochs_completed"]
        1
        >>> worker.stop(); data.stop()
    """

    def __init__(self, config: LearnerConfig):
        self.config = config
        self.learner = config.learner_class(config, config.module_spec)
        self.feed: LearnerFeed | None = None
        self._stream: FeedStream | None = None
        #: Where the feed opens: a stream's ``saved_position()`` (``None``: the start).
        self._saved: Mapping[str, Any] | None = None
        #: The online share of each batch (``input_`` mixing in ``"sampler"``), else ``None``.
        self.online: OnlineRows | None = None
        #: Optimizer steps taken so far (the version of the weights).
        self.num_steps = 0

    def attach(self, feed: LearnerFeed) -> None:
        """Trains on the batches of ``feed``, opened here at the first ``train()``."""
        self.feed = feed

    def open_feed(self) -> FeedStream:
        """The feed's stream, opened now if not yet (it then builds the pipeline in its thread
        while the caller goes on)."""
        if self._stream is None:
            self._stream = self.feed.open(self._saved)
        return self._stream

    def wait_for_data(self) -> None:
        """Returns once the feed's stream has its first batch (or has failed)."""
        self.open_feed().wait_for_data()

    def position(self) -> dict[str, Any] | None:
        """Where the feed's stream stands, for a checkpoint (``None``: it cannot resume)."""
        if self._stream is None:
            return None if self._saved is None else dict(self._saved)
        return self._stream.saved_position()

    def resume(self, saved: Mapping[str, Any]) -> None:
        """Reads on from ``saved`` (what ``position()`` returned): the stream restarts there,
        at once when it had opened, else when it opens."""
        self._saved = saved
        if self._stream is not None:
            self._stream.stop()
            self._stream = None
            self.open_feed()

    def mix_online(self, data_config: DataConfig, rank: int) -> None:
        """Mixes ``data_config.sampler_weight`` of online rows into every batch, from a
        replay buffer of the episodes ``add_online_episodes`` hands this learner."""
        seed = self.config.debugging.seed
        self.online = OnlineRows(data_config, seed=None if seed is None else seed + rank)

    def add_online_episodes(self, episode_states: list[dict[str, Any]]) -> None:
        """Adds the sampler's new episodes (``get_state()`` dicts) to the online buffer."""
        self.online.add(episode_states)

    def _next_batch(self, num_rows: int, stop_at_epoch_end: bool) -> dict[str, Any] | None:
        stream = self.open_feed()
        if self.online is None:
            return stream.next_batch(num_rows, stop_at_epoch_end=stop_at_epoch_end)
        online_rows = self.online.num_rows(num_rows)
        batch = stream.next_batch(num_rows - online_rows,
                                       stop_at_epoch_end=stop_at_epoch_end)
        return None if batch is None else self.online.mixed_into(batch, online_rows,
                                                                 self.num_steps)

    @property
    def stats(self) -> StreamStats:
        """What this learner's data stream did so far."""
        return self.open_feed().stats

    def train(self) -> dict[str, Any]:
        """One iteration: updates until the planned count (or the epoch's end) and, with other
        learners, until none of them has a batch left. Returns this learner's figures."""
        planned = self.config.offline_data.dataset_num_iters_per_learner
        batch_size = self.config.training.train_batch_size_per_learner
        stats = self.stats
        wait_before, epochs_before = stats.wait_s, stats.epochs_completed
        sources_before = dict(stats.source_rows)
        online_before = 0 if self.online is None else self.online.rows_taken
        updates, staleness, steps, has_data = [], [], 0, True
        while True:
            batch = None
            if has_data and (planned is None or len(updates) < planned):
                batch = self._next_batch(batch_size, bool(updates) and planned is None)
            has_data = batch is not None
            if batch is not None and WEIGHTS_VERSION in batch:
                staleness.append(float(np.mean(self.num_steps - batch.pop(WEIGHTS_VERSION))))
            metrics = self.learner.update(batch)
            if metrics is None:
                break
            steps += 1
            self.num_steps += 1
            if batch is not None:
                updates.append(metrics)
        return {
            "metrics": {key: float(np.mean([u[key] for u in updates])) for key in updates[0]
                        if key != "num_module_steps_trained"} if updates else {},
            "num_module_steps_trained": sum(u["num_module_steps_trained"] for u in updates),
            "num_online_rows_trained": (0 if self.online is None
                                        else self.online.rows_taken - online_before),
            "num_updates": len(updates),
            "num_updates_planned": planned,
            "num_optimizer_steps": steps,
            "staleness": staleness,
            "epochs_completed": stats.epochs_completed,
            "epochs_this_iter": stats.epochs_completed - epochs_before,
            "rows_per_epoch": stats.epoch_rows[-1] if stats.epoch_rows else None,
            "wait_s": stats.wait_s - wait_before,
            "first_batch_wait_s": stats.first_batch_wait_s,
            "source_rows": {name: rows - sources_before.get(name, 0)
                            for name, rows in stats.source_rows.items()},
        }

    # --------------------------------------------------------------------- distributed setup
    def node_id(self) -> str:
        """The Ray node this worker runs on (for ``streaming_split`` locality hints)."""
        return ray.get_runtime_context().get_node_id()

    def free_address(self) -> str:
        """``tcp://ip:port`` with a free port on this node, for the process group's store."""
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def join_process_group(self, address: str, rank: int, world_size: int) -> None:
        """Joins the learners' process group (gloo on CPU, nccl on CUDA) and takes rank 0's
        weights, so all learners start identical."""
        backend = "nccl" if self.learner.device.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=address, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=PROCESS_GROUP_TIMEOUT_S))
        for tensor in self.learner.module.state_dict().values():
            dist.broadcast(tensor, src=0)

    # ---------------------------------------------------------------------------- state
    def loss_metrics(self, batches: list[dict[str, np.ndarray]]) -> dict[str, float]:
        """The learner's loss metrics on ``batches``, without a step."""
        return self.learner.loss_metrics(batches)

    def get_weights(self) -> dict[str, np.ndarray]:
        """The module's weights as CPU numpy arrays."""
        return numpy_state(self.learner.module)

    def get_state(self, components: str | list[str] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
        """Module and optimizer state (or the ``components`` asked: see
        ``Learner.get_state``), on the CPU."""
        return _to_cpu(self.learner.get_state(components, **kwargs))

    def set_state(self, state: dict[str, Any], num_steps: int) -> None:
        """Restores ``get_state``'s state (or just its ``module``) and the step count."""
        self.learner.set_state(state)
        self.num_steps = self.learner.num_updates = num_steps

    def stop(self) -> None:
        """Stops its feed's stream (``OfflineData`` is its owner's to stop) and leaves the
        process group."""
        if self._stream is not None:
            self._stream.stop()
            self._stream = None
        if dist.is_initialized():
            dist.destroy_process_group()


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(item) for item in value)
    return value
