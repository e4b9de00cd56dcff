"""Reading a file that something else wrote (a checkpoint's state, a YAML config) safely: it
must be a regular file, inside its folder when it belongs to one, and within a size cap, all
checked before it is opened, so that a FIFO cannot hang the reader, a link to ``/dev/zero``
cannot fill memory and a link out of a checkpoint folder is not followed.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from offline_rl.errors import ConfigError
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "config.yaml").write_text("training: {lr: 0.001}")
    21
    >>> read_checked_bytes(folder / "config.yaml", max_bytes=1024, error=ConfigError)
    b'training: {lr: 0.001}'
    >>> read_checked_bytes(folder, max_bytes=1024, error=ConfigError)
    Traceback (most recent call last):
    ...
    offline_rl.errors.ConfigError: ... is a directory, not a file
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from offline_rl.errors import OfflineRLError


def checked_file(path: str | Path, *, max_bytes: int, error: type[OfflineRLError],
                 folder: str | Path | None = None) -> Path:
    """``path`` once it is known to be a regular file (after links) of at most ``max_bytes``,
    inside ``folder`` if given; otherwise ``error`` naming the file and the fault."""
    path = Path(path)
    if folder is not None and not path.resolve().is_relative_to(Path(folder).resolve()):
        raise error(f"{path} links to {path.resolve()}, outside {folder}; files are read only "
                    f"from inside their folder: copy the file into {folder} instead of linking")
    try:
        status = os.stat(path)  # follows links; never opens, so a FIFO cannot block
    except FileNotFoundError:
        what = "a link to a missing file" if path.is_symlink() else "missing"
        raise error(f"{path} is {what}") from None
    except OSError as failure:  # a link loop, a permission error
        raise error(f"{path} cannot be read: {failure.strerror}") from None
    if stat.S_ISDIR(status.st_mode):
        raise error(f"{path} is a directory, not a file")
    if not stat.S_ISREG(status.st_mode):
        raise error(f"{path} is not a regular file (a device, FIFO or socket); refused to read "
                    "from it")
    if status.st_size > max_bytes:
        raise error(f"{path} holds {status.st_size:,} bytes, over the cap of {max_bytes:,}; "
                    "it is not a file offline-rl wrote, or it is damaged")
    return path


def read_checked_bytes(path: str | Path, *, max_bytes: int, error: type[OfflineRLError],
                       folder: str | Path | None = None) -> bytes:
    """The bytes of ``path`` after ``checked_file``'s checks; a file that grows past the cap
    while it is read is refused too."""
    checked = checked_file(path, max_bytes=max_bytes, error=error, folder=folder)
    with open(checked, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise error(f"{path} grew past the cap of {max_bytes:,} bytes while it was read")
    return data
