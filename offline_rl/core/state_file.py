"""Reading a learner's state file: tensors and plain data only, nothing in it ever runs."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from offline_rl.errors import DataFormatError


def load_state_file(path: str | Path, map_location: str | torch.device = "cpu") -> Any:
    """``torch.load(path, weights_only=True)``: tensors, numbers, strings and containers of
    them. A file holding any other object (code a crafted file would run when unpickled) is a
    ``DataFormatError`` naming it; nothing in it is executed.

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/state.pt"
        >>> torch.save({"module": {"w": torch.ones(2)}}, path)
        >>> load_state_file(path)["module"]["w"].tolist()
        [1.0, 1.0]
    """
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        first_line = str(error).strip().splitlines()[0]
        raise DataFormatError(
            f"{path} holds objects other than tensors and plain data ({first_line}); "
            "offline-rl never unpickles code from a checkpoint. Was it written by offline-rl? "
            "Save a state with Algorithm.save_to_path") from None
