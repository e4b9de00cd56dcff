"""``RecorderConfig``: where and how a ``Recorder`` plays and writes episodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RecorderConfig:
    """The env, the env runners and the ``output*`` options (see
    ``AlgorithmConfig.env_runners`` and ``.offline_data`` for each field).

    Example:
        >>> config = RecorderConfig(env="CartPole-v1", output="data/recorded")
        >>> config.num_env_runners, config.output_write_episodes
        (1, True)
    """

    env: str | Callable[[dict], Any] | None = None
    env_config: dict[str, Any] = field(default_factory=dict)
    num_env_runners: int = 1
    num_envs_per_env_runner: int = 1
    num_cpus_per_env_runner: float = 1
    output: str | None = None
    output_compress_columns: list[str] = field(default_factory=lambda: ["obs", "new_obs"])
    output_max_file_size: int = 64 * 1024 * 1024
    output_max_rows_per_file: int | None = None
    output_write_method: str = "write_parquet"
    output_write_method_kwargs: dict[str, Any] = field(default_factory=dict)
    output_filesystem: Any = None
    output_filesystem_kwargs: dict[str, Any] = field(default_factory=dict)
    output_write_episodes: bool = True
    seed: int | None = None
