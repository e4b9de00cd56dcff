"""A run folder's result files: ``result.json`` (one JSON line per ``train()`` result),
``progress.csv`` (flat columns) and, with ``tensorboard`` or ``tensorboardX`` installed,
TensorBoard event files."""

from __future__ import annotations

import csv
import json
import math
import numbers
from pathlib import Path
from typing import Any

from offline_rl.errors import DataFormatError, DataNotFoundError

RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.csv"
#: Seconds between TensorBoard's writes to disk (and on close), off the training loop's path.
TENSORBOARD_FLUSH_S = 10


def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested results as ``{"a/b/c": value}``; a list of dicts (per-learner figures) gets one
    column per index.

    Examples:
        >>> flatten({"learners": {"default_policy": {"loss": 0.5}}, "per": [{"n": 1}]})
        {'learners/default_policy/loss': 0.5, 'per/0/n': 1}
    """
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            value = dict(enumerate(value))
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def read_results(run_dir: str | Path) -> list[dict[str, Any]]:
    """The results in ``run_dir``'s ``result.json``; a missing file is a ``DataNotFoundError``,
    a line that is no JSON a ``DataFormatError`` naming it."""
    file = Path(run_dir) / RESULT_FILE
    if not file.exists():
        raise DataNotFoundError(f"{run_dir} has no {RESULT_FILE}: give the folder that "
                                "offline-rl train --output-dir wrote")
    results = []
    for number, line in enumerate(file.read_text().splitlines(), 1):
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{file} line {number} is not a JSON result ({error})"
                                  ) from None
    return results


def _summary_writer_class() -> type | None:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            return None
    return SummaryWriter


class ResultLog:
    """Appends ``train()`` results to the files of ``run_dir``; ``progress.csv`` gains a
    column when a result brings a new figure (the first evaluation's, say), the rows before
    it left blank there. TensorBoard gets every finite number, at step
    ``training_iteration``, when ``tensorboard`` (or ``tensorboardX``) is installed. With
    ``resume_after=N`` (a run resumed from its checkpoint at iteration ``N``) the files keep
    the results up to ``N`` and continue after them.

    Examples:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> with ResultLog(run) as log:
        ...     log.write({"training_iteration": 1, "learners": {"loss": 0.5}})
        ...     log.write({"training_iteration": 2, "learners": {"loss": 0.4},
        ...                "evaluation": {"return": 9.0}})
        >>> print((run / "progress.csv").read_text().strip())
        training_iteration,learners/loss,evaluation/return
        1,0.5,
        2,0.4,9.0
    """

    def __init__(self, run_dir: str | Path, *, tensorboard: bool = True,
                 resume_after: int | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        kept = self._results_until(resume_after) if resume_after is not None else []
        self._json = (self.run_dir / RESULT_FILE).open("w")
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = []
        writer_class = _summary_writer_class() if tensorboard else None
        self.tensorboard = (writer_class(str(self.run_dir), purge_step=(resume_after or 0) + 1,
                                         flush_secs=TENSORBOARD_FLUSH_S)
                            if writer_class else None)
        for result in kept:
            self._append(result, tensorboard=False)

    def _results_until(self, iteration: int) -> list[dict[str, Any]]:
        """The results already in ``result.json`` up to ``iteration`` (a resumed run's; later
        ones, written after its last checkpoint, are dropped)."""
        if not (self.run_dir / RESULT_FILE).exists():
            return []
        return [result for result in read_results(self.run_dir)
                if result.get("training_iteration", 0) <= iteration]

    def write(self, result: dict[str, Any]) -> None:
        """Appends one ``train()`` result to every file."""
        self._append(result, tensorboard=True)

    def _append(self, result: dict[str, Any], *, tensorboard: bool) -> None:
        self._json.write(json.dumps(result) + "\n")
        self._json.flush()
        row = flatten(result)
        self._rows.append(row)
        new = [column for column in row if column not in self._columns]
        self._columns += new
        if new or len(self._rows) == 1:
            self._rewrite_progress()
        else:
            with (self.run_dir / PROGRESS_FILE).open("a", newline="") as file:
                csv.DictWriter(file, fieldnames=self._columns).writerow(row)
        if tensorboard and self.tensorboard is not None:
            step = int(result.get("training_iteration", len(self._rows)))
            for name, value in row.items():
                if (isinstance(value, numbers.Real) and not isinstance(value, bool)
                        and math.isfinite(value)):
                    self.tensorboard.add_scalar(name, value, step)

    def _rewrite_progress(self) -> None:
        with (self.run_dir / PROGRESS_FILE).open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=self._columns)
            writer.writeheader()
            writer.writerows(self._rows)

    def close(self) -> None:
        """Closes the files."""
        self._json.close()
        if self.tensorboard is not None:
            self.tensorboard.close()

    def __enter__(self) -> ResultLog:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
