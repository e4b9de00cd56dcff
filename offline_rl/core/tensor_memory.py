"""Keeping the memory of freed CPU tensors in the process, for the next update to reuse.

glibc's ``malloc`` maps each allocation above its mmap threshold (128 KiB at first, at most
32 MiB as it adapts) from the system, and gives it back when it is freed; it also gives the
top of its heap back once more than its trim threshold is free there. A CPU learner
allocates and frees the same large activations and gradients every update (CQL's 30
candidate actions per row are 7,680 x 256 floats, 8 MB, per layer at batch 256), so every
update pays the system's page faults again to touch fresh pages. With the thresholds raised,
freed tensors stay in the heap for the next update: CQL's update on Pendulum fell from
58-66 ms to 49-51 ms here (2 cores, batch 256).
"""

from __future__ import annotations

import ctypes
import os
import platform

#: Allocations up to this size come from the heap (glibc's ``M_MMAP_THRESHOLD``).
MMAP_THRESHOLD = 64 << 20
#: Free memory at the heap's top kept before it is given back (glibc's ``M_TRIM_THRESHOLD``).
TRIM_THRESHOLD = 512 << 20
#: glibc's environment settings of these thresholds: a user who sets one keeps their choice.
GLIBC_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_tensor_memory() -> bool:
    """Raises glibc's mmap and trim thresholds for this process (see the module); returns
    whether it did. Nothing changes off Linux's glibc, or where the environment sets one of
    ``GLIBC_SETTINGS`` (set ``MALLOC_MMAP_THRESHOLD_`` yourself to choose other values).

    Examples:
        >>> import platform
        >>> keep_freed_tensor_memory() == (platform.libc_ver()[0] == "glibc")
        True
    """
    if (platform.system() != "Linux" or platform.libc_ver()[0] != "glibc"
            or any(name in os.environ for name in GLIBC_SETTINGS)):
        return False
    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
