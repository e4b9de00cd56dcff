"""Expert data recorded by RLlib itself: the scripted experts of ``offline_rl.datasets.experts``
as tiny RLlib torch ``RLModule``s, played by RLlib's own recording env runner
(``OfflineSingleAgentEnvRunner``) into RLlib's tabular Parquet, as RLlib's
``cartpole-v1_large`` and ``pendulum-v1_enormous`` are. Test-only: it imports ``ray.rllib``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import ray.data
import torch
from ray.rllib.algorithms.bc import BCConfig as RLlibBCConfig
from ray.rllib.core.columns import Columns as RLlibColumns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec as RLlibRLModuleSpec
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner

from offline_rl.datasets.experts import cartpole_expert, pendulum_expert

#: Pendulum-v1's torque bound: RLlib's env runners normalize actions (``normalize_actions``),
#: so the module acts in [-1, 1] and the episodes (and files) hold those normalized actions.
PENDULUM_MAX_TORQUE = 2.0


class ScriptedExpertModule(TorchRLModule):
    """Acts with a scripted expert, ``expert(obs) -> action``; no trained weights (one unused
    parameter, so that RLlib finds the module's device)."""

    expert = staticmethod(cartpole_expert)

    def setup(self) -> None:
        self._unused = torch.nn.Parameter(torch.zeros(1))

    def _act(self, batch: dict) -> dict:
        obs = batch[RLlibColumns.OBS].detach().cpu().numpy()
        actions = np.stack([np.asarray(self.expert(row)) for row in obs])
        return {RLlibColumns.ACTIONS: torch.as_tensor(actions)}

    def _forward(self, batch: dict, **kwargs) -> dict:
        return self._act(batch)

    def _forward_exploration(self, batch: dict, **kwargs) -> dict:
        return self._act(batch)


class CartPoleExpertModule(ScriptedExpertModule):
    """CartPole-v1: the linear rule on cart and pole angle and velocities."""


def normalized_pendulum_expert(obs: np.ndarray) -> np.ndarray:
    """Pendulum-v1's energy-shaping swing-up, as a normalized action in [-1, 1]."""
    return (pendulum_expert(obs) / PENDULUM_MAX_TORQUE).astype(np.float32)


class PendulumExpertModule(ScriptedExpertModule):
    """Pendulum-v1: energy-shaping swing-up, PD balance near the top."""

    expert = staticmethod(normalized_pendulum_expert)


EXPERT_MODULES = {"CartPole-v1": CartPoleExpertModule, "Pendulum-v1": PendulumExpertModule}


def record_expert(env: str, output: Path, num_episodes: int, seed: int = 0) -> Path:
    """Records ``num_episodes`` episodes of ``env``'s scripted expert with RLlib's
    ``OfflineSingleAgentEnvRunner``, as uncompressed tabular Parquet under ``output``."""
    config = (
        RLlibBCConfig()  # any config that builds modules; the spec's class replaces BC's
        .environment(env)
        .env_runners(batch_mode="complete_episodes")
        .rl_module(rl_module_spec=RLlibRLModuleSpec(module_class=EXPERT_MODULES[env]))
        .offline_data(output=str(output), output_write_episodes=False,
                      output_compress_columns=[],
                      # One file per recording (Ray Data writes a file per block otherwise).
                      output_write_method_kwargs={"min_rows_per_file": 1_000_000})
        .debugging(seed=seed)
    )
    return rllib_record(config, output, num_episodes=num_episodes, explore=False)


def rllib_record(config, output: Path, **sample_kwargs) -> Path:
    """Records with RLlib's ``OfflineSingleAgentEnvRunner`` of ``config`` (an RLlib config
    whose ``offline_data(output=...)`` is ``output``), ``sample(**sample_kwargs)``."""
    context = ray.data.DataContext.get_current()
    limits = context.execution_options.resource_limits
    try:
        runner = OfflineSingleAgentEnvRunner(config=config, worker_index=1)
        runner.sample(**sample_kwargs)
        runner.stop()
    finally:  # the runner caps this process's Ray Data at its own CPUs; lift the cap again
        context.execution_options.resource_limits = limits
    # RLlib's writer logs its errors and goes on
    assert sorted(output.rglob("*.parquet")), f"RLlib wrote nothing under {output}"
    return output
