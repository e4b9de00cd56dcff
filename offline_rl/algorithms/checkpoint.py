"""The checkpoint folder: ``config.yaml``, ``learner_state.pt`` and ``algorithm_state.json``.

Checkpoints are written to a temporary folder and renamed into place, so a crash mid-write never
leaves a half-written checkpoint under the final name. Loading reads tensors and plain data only.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.errors import ConfigError, DataNotFoundError

CONFIG_FILE = "config.yaml"
LEARNER_STATE_FILE = "learner_state.pt"
ALGORITHM_STATE_FILE = "algorithm_state.json"
#: Key of ``algorithm_state.json`` saying why the config could not be saved.
NO_CONFIG_KEY = "config_not_saved"


def write_checkpoint(path: str | Path, learner: Any, config: AlgorithmConfig,
                     algorithm_state: dict[str, Any]) -> Path:
    """Writes a checkpoint folder at ``path`` (replacing an older one); returns the path."""
    target = Path(path)
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    learner.save_state(staging / LEARNER_STATE_FILE)
    try:
        config.to_yaml(staging / CONFIG_FILE)
    except ConfigError as error:  # e.g. a lambda as env creator: YAML cannot hold it
        algorithm_state = {**algorithm_state, NO_CONFIG_KEY: error.message}
        warnings.warn(f"checkpoint {target} has no {CONFIG_FILE}: {error.message}. Loading it "
                      "will need the config: Algorithm.from_checkpoint(path, config=...)",
                      UserWarning, stacklevel=3)
    (staging / ALGORITHM_STATE_FILE).write_text(json.dumps(algorithm_state, indent=2))
    previous = target.with_name(f"{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(previous)
    staging.rename(target)
    shutil.rmtree(previous, ignore_errors=True)
    return target


def read_algorithm_state(path: str | Path) -> dict[str, Any]:
    """The counters saved with a checkpoint."""
    return json.loads(_checkpoint_file(path, ALGORITHM_STATE_FILE).read_text())


def read_config(path: str | Path) -> AlgorithmConfig:
    """The config saved with a checkpoint."""
    config_file = Path(path) / CONFIG_FILE
    if not config_file.exists():
        reason = read_algorithm_state(path).get(NO_CONFIG_KEY, "it was not saved")
        raise DataNotFoundError(f"{path} has no {CONFIG_FILE} ({reason}); pass the config: "
                                "Algorithm.from_checkpoint(path, config=...)")
    return AlgorithmConfig.from_yaml(config_file)


def learner_state_file(path: str | Path) -> Path:
    """The torch file with module weights and optimizer state."""
    return _checkpoint_file(path, LEARNER_STATE_FILE)


def load_module(path: str | Path) -> Any:
    """The trained policy module of a checkpoint, on CPU, without starting Ray."""
    import torch

    config = read_config(path)
    spec = config.get_rl_module_spec(config.observation_space, config.action_space)
    module = spec.build()
    state = torch.load(learner_state_file(path), map_location="cpu", weights_only=True)
    module.load_state_dict(state["module"])
    return module.eval()


def _checkpoint_file(path: str | Path, name: str) -> Path:
    file = Path(path) / name
    if not file.exists():
        raise DataNotFoundError(f"{path} is not an offline-rl checkpoint: {name} is missing")
    return file
