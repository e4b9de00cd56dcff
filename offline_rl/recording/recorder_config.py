"""``RecorderConfig``: where and how a ``Recorder`` plays and writes episodes."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from offline_rl.filesystems import absolute_path
from offline_rl.settings.debugging import DebuggingConfig
from offline_rl.settings.environment import EnvironmentConfig
from offline_rl.settings.flat_access import FlatAccess
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.resources import EnvRunnersConfig


@dataclass
class RecorderConfig(FlatAccess):
    """The env, the env runners and the ``output*`` options of ``offline_data`` (see
    ``AlgorithmConfig.env_runners`` and ``.offline_data``), the config's own section objects.

    Examples:
        >>> config = RecorderConfig(EnvironmentConfig(env="CartPole-v1"),
        ...                         offline_data=OfflineDataConfig(output="data/recorded"))
        >>> config.env_runners.num_env_runners, config.offline_data.output_write_episodes
        (1, True)
    """

    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    env_runners: EnvRunnersConfig = field(default_factory=EnvRunnersConfig)
    offline_data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    debugging: DebuggingConfig = field(default_factory=DebuggingConfig)

    def __post_init__(self) -> None:
        # The recording actors write from working folders of their own: a local folder is
        # made absolute here, in the process that names it (the caller's section is kept).
        output = self.offline_data.output
        if (isinstance(output, str | os.PathLike) and output
                and self.offline_data.output_filesystem is None):
            self.offline_data = dataclasses.replace(self.offline_data,
                                                    output=absolute_path(os.fspath(output)))
