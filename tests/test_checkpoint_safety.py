"""Loading a checkpoint never runs code from it: crafted state and config files are refused
with an error naming them, and the code in them does not run."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl import Algorithm, BCConfig
from offline_rl.algorithms.checkpoint import CONFIG_FILE, LEARNER_STATE_FILE, load_module
from offline_rl.errors import ConfigError, DataFormatError


class Touch:
    """Unpickling this creates ``path``: what a crafted file would do in its place."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def checkpoint_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    spaces = {"observation_space": gym.spaces.Box(-5, 5, (4,), np.float32),
              "action_space": gym.spaces.Discrete(2)}
    BCConfig().environment("CartPole-v1", **spaces).offline_data(input_="data").to_yaml(
        folder / CONFIG_FILE)
    return folder


def test_a_crafted_learner_state_is_refused_and_never_runs(tmp_path):
    folder, marker = checkpoint_folder(tmp_path), tmp_path / "ran"
    torch.save({"module": Touch(marker)}, folder / LEARNER_STATE_FILE)
    with pytest.raises(DataFormatError, match=rf"{LEARNER_STATE_FILE} holds objects other than "
                                              r"tensors and plain data .*never unpickles code"):
        load_module(folder)
    assert not marker.exists()


def test_a_crafted_config_file_is_refused_and_never_runs(tmp_path):
    folder, marker = checkpoint_folder(tmp_path), tmp_path / "ran"
    (folder / CONFIG_FILE).write_text(
        f"!!python/object/apply:pathlib.Path.touch [!!python/object/apply:pathlib.Path "
        f"['{marker}']]\n")
    with pytest.raises(ConfigError, match=rf"{CONFIG_FILE} is no plain YAML config .*tags that "
                                          r"build Python objects are refused"):
        Algorithm.from_checkpoint(folder)
    assert not marker.exists()


def test_layers_too_large_to_allocate_are_a_config_error_naming_them(tmp_path):
    folder = checkpoint_folder(tmp_path)
    BCConfig.from_yaml(folder / CONFIG_FILE).rl_module(
        model_config={"fcnet_hiddens": [4 * 10**12]}).to_yaml(folder / CONFIG_FILE)
    with pytest.raises(ConfigError, match=r"DefaultTorchRLModule's weights do not fit in memory "
                                          r"with model_config \{'fcnet_hiddens': \[4000000000000\]"
                                          r".*allocate.*; choose smaller layers"):
        load_module(folder)
