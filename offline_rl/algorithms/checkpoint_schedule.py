"""Periodic checkpoints of a training run: every K iterations, the newest M kept."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

from offline_rl.algorithms.checkpoint import ALGORITHM_STATE_FILE, read_algorithm_state
from offline_rl.errors import ConfigError, DataNotFoundError
from offline_rl.settings.evaluation import CheckpointingConfig

#: A periodic checkpoint's folder name, ``checkpoint_`` and the iteration (the final one is
#: plain ``checkpoint``).
PERIODIC_CHECKPOINT_NAME = "checkpoint_{iteration:06d}"


class SavesCheckpoints(Protocol):
    """What ``PeriodicCheckpoints`` needs of an algorithm."""

    def save_to_path(self, path: str | Path) -> str: ...


class PeriodicCheckpoints:
    """Writes ``<output>/checkpoint_<iteration:06d>`` every ``frequency`` iterations and, once
    the new one is complete, deletes the oldest beyond the newest ``keep`` (``None``: keeps
    all). ``frequency=0`` writes none. Only checkpoints this object wrote are ever deleted.

    ``save_to_path`` writes to a staging folder and renames it into place, so a run killed
    mid-write leaves the previous checkpoints intact.

    Examples:
        >>> import tempfile
        >>> from offline_rl import BCConfig
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .training(train_batch_size_per_learner=256)
        ...           .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=1))
        >>> with tempfile.TemporaryDirectory() as output, config.build() as algo:
        ...     checkpoints = PeriodicCheckpoints(output, frequency=2, keep=1)
        ...     for _ in range(5):
        ...         written = checkpoints.after_iteration(algo, algo.train()["training_iteration"])
        ...     kept = [Path(path).name for path in checkpoints.kept]
        >>> written is None, kept
        (True, ['checkpoint_000004'])
    """

    def __init__(self, output: str | Path, *, frequency: int, keep: int | None = None) -> None:
        problems = CheckpointingConfig(checkpoint_frequency=frequency,
                                       keep_checkpoints_num=keep).problems()
        if problems:
            raise ConfigError("; ".join(f"{field}: {problem}" for field, problem in problems))
        self.output = Path(output)
        self.frequency = frequency
        self.keep = keep
        self._kept: list[str] = []

    @property
    def kept(self) -> list[str]:
        """The periodic checkpoints on disk, oldest first."""
        return list(self._kept)

    def after_iteration(self, algo: SavesCheckpoints, iteration: int) -> str | None:
        """Checkpoints ``algo`` when ``iteration`` is a multiple of ``frequency`` and deletes
        the checkpoints beyond ``keep``; returns the path written, or ``None``."""
        if not self.frequency or iteration % self.frequency:
            return None
        path = algo.save_to_path(self.output / PERIODIC_CHECKPOINT_NAME.format(iteration=iteration))
        self._kept = [*(kept for kept in self._kept if kept != path), path]
        while self.keep is not None and len(self._kept) > self.keep:
            # One already deleted by hand is no reason to stop training.
            shutil.rmtree(self._kept.pop(0), ignore_errors=True)
        return path


def newest_checkpoint(run_dir: str | Path) -> Path:
    """The checkpoint of ``run_dir`` (the final ``checkpoint`` or a ``checkpoint_<iteration>``)
    saved at the latest training iteration; ``DataNotFoundError`` when it holds none."""
    found = [(read_algorithm_state(folder)["training_iteration"], folder)
             for folder in Path(run_dir).glob("checkpoint*")
             if (folder / ALGORITHM_STATE_FILE).is_file()]
    if not found:
        raise DataNotFoundError(f"{run_dir} holds no checkpoint to resume from; train with "
                                "--checkpoint-frequency K so that a stopped run keeps one")
    return max(found)[1]
