"""A learner's process keeps the memory of freed CPU tensors for its next update."""

from __future__ import annotations

import ctypes
import platform

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl import BCConfig
from offline_rl.core import tensor_memory
from offline_rl.core.tensor_memory import keep_freed_tensor_memory

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")

GLIBC_DEFAULT_MMAP_THRESHOLD = 128 << 10


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def mapped_bytes_while_holding(num_bytes: int) -> int:
    """How much more memory glibc holds in mmapped chunks while a tensor of ``num_bytes``
    lives."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    before = libc.mallinfo2().hblkhd
    tensor = torch.ones(num_bytes // 4)
    held = libc.mallinfo2().hblkhd - before
    del tensor
    return held


def test_creating_a_learner_keeps_large_tensors_in_the_heap():
    libc = ctypes.CDLL(None)
    libc.mallopt(tensor_memory._M_MMAP_THRESHOLD, GLIBC_DEFAULT_MMAP_THRESHOLD)
    assert mapped_bytes_while_holding(8 << 20) >= 8 << 20
    config = BCConfig().rl_module(model_config={"fcnet_hiddens": [8]})
    spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32),
                                     gym.spaces.Discrete(2))
    config.get_default_learner_class()(config.learner_config(spec))
    assert mapped_bytes_while_holding(8 << 20) == 0


def test_the_users_own_glibc_setting_is_kept(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(GLIBC_DEFAULT_MMAP_THRESHOLD))
    assert keep_freed_tensor_memory() is False
