"""Reading a learner's state file: tensors and plain data only, nothing in it ever runs; a
damaged file is a ``CheckpointError`` naming it."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import torch

from offline_rl.errors import CheckpointError


def load_state_file(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """``torch.load(path, weights_only=True)``: tensors, numbers, strings and containers of
    them, as a dict with the module's state under ``"module"``. A file holding any other object
    (code a crafted file would run when unpickled), or damaged (truncated, not a torch file, of
    another layout), is a ``CheckpointError`` naming it; nothing in it is executed.

    Examples:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/state.pt"
        >>> torch.save({"module": {"w": torch.ones(2)}}, path)
        >>> load_state_file(path)["module"]["w"].tolist()
        [1.0, 1.0]
    """
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"Unsupported [^.\n]*", str(error))
        detail = found.group(0) if found else str(error).strip().splitlines()[0]
        if not detail.startswith("Unsupported global"):
            raise CheckpointError(f"{path} is damaged: it is no torch state file ({detail}); "
                                  "save the state again with Algorithm.save_to_path") from None
        raise CheckpointError(
            f"{path} holds objects other than tensors and plain data ({detail}); "
            "offline-rl never unpickles code from a checkpoint. Was it written by offline-rl? "
            "Save a state with Algorithm.save_to_path") from None
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CheckpointError(f"{path} is damaged, truncated or no torch state file "
                              f"({first_line}); save the state again with "
                              "Algorithm.save_to_path") from None
    if not (isinstance(state, dict) and isinstance(state.get("module"), dict)):
        raise CheckpointError(f"{path} holds no module state (a dict with a 'module' dict of "
                              "tensors); it was not written by offline-rl's save_state")
    return state
