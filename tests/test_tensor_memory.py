"""A learner's process keeps the memory of freed CPU tensors for its next update."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from offline_rl.core.tensor_memory import keep_freed_tensor_memory

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")

#: In a fresh process: glibc's bytes in mmapped chunks while an 8 MB tensor lives, before and
#: after a learner is created.
MAPPED_BYTES_OF_AN_8_MB_TENSOR = """
import ctypes, json
import gymnasium as gym, numpy as np, torch
from offline_rl import BCConfig

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def mapped_bytes():
    before = libc.mallinfo2().hblkhd
    tensor = torch.ones(2 << 20)
    return libc.mallinfo2().hblkhd - before

before = mapped_bytes()
config = BCConfig().rl_module(model_config={"fcnet_hiddens": [8]})
spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
config.get_default_learner_class()(config.learner_config(spec))
print(json.dumps([before, mapped_bytes()]))
"""


def test_creating_a_learner_keeps_large_tensors_in_the_heap():
    child = subprocess.run([sys.executable, "-c", MAPPED_BYTES_OF_AN_8_MB_TENSOR],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    before, after = json.loads(child.stdout.splitlines()[-1])
    assert before >= 8 << 20  # glibc's default: mapped from the system, given back when freed
    assert after == 0


def test_the_users_own_glibc_setting_is_kept(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(128 << 10))
    assert keep_freed_tensor_memory() is False
