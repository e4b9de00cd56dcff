"""``IOContext``: what a custom input reader or output writer is built with (RLlib's old-stack
``ray.rllib.offline.IOContext``).

Each read task of a custom input (``offline_rl.data.source.custom_input``) builds its reader with
``creator(IOContext(worker_index=i, config=...))``, and each recording actor its writer alike,
so a reader or writer finds its own index and the ``input_config`` / ``output_config`` the
config gave.

Examples:
    >>> ioctx = IOContext(config={"input_config": {"seed": 3}}, worker_index=1)
    >>> ioctx.input_config, ioctx.output_config, ioctx.worker_index
    ({'seed': 3}, {}, 1)
    >>> ioctx.default_sampler_input() is None
    True
"""

from __future__ import annotations

from typing import Any


class IOContext:
    """Attributes passed to input reader and output writer creators: ``log_dir`` (where a
    writer may put files, or ``None``), ``config`` (a dict: the ``offline_data`` options, among
    them ``input_config`` and ``output_config``), ``worker_index`` (the read task's or the
    recording actor's number, from 0) and ``worker`` (always ``None``: there is no
    ``RolloutWorker`` here)."""

    def __init__(self, log_dir: str | None = None, config: dict[str, Any] | None = None,
                 worker_index: int = 0, worker: Any = None) -> None:
        self.log_dir = log_dir
        self.config = config if config is not None else {}
        self.worker_index = worker_index
        self.worker = worker

    @property
    def input_config(self) -> dict[str, Any]:
        """The config's ``input_config``: arguments for a custom input reader."""
        return self.config.get("input_config") or {}

    @property
    def output_config(self) -> dict[str, Any]:
        """The config's ``output_config``: arguments for a custom output writer."""
        return self.config.get("output_config") or {}

    def default_sampler_input(self) -> None:
        """RLlib's sampler input of the rollout worker: ``None``, as offline-rl trains from
        recorded data only and samples no env while training."""
        return None

    def __repr__(self) -> str:
        return f"IOContext(worker_index={self.worker_index}, log_dir={self.log_dir!r})"
