"""``RecorderConfig``: where and how a ``Recorder`` plays and writes episodes."""

from __future__ import annotations

from dataclasses import dataclass, field

from offline_rl.settings.debugging import DebuggingConfig
from offline_rl.settings.environment import EnvironmentConfig
from offline_rl.settings.flat_access import FlatAccess
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.resources import EnvRunnersConfig


@dataclass
class RecorderConfig(FlatAccess):
    """The env, the env runners and the ``output*`` options of ``offline_data`` (see
    ``AlgorithmConfig.env_runners`` and ``.offline_data``), the config's own section objects.

    Example:
        >>> config = RecorderConfig(EnvironmentConfig(env="CartPole-v1"),
        ...                         offline_data=OfflineDataConfig(output="data/recorded"))
        >>> config.env_runners.num_env_runners, config.offline_data.output_write_episodes
        (1, True)
    """

    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    env_runners: EnvRunnersConfig = field(default_factory=EnvRunnersConfig)
    offline_data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    debugging: DebuggingConfig = field(default_factory=DebuggingConfig)
