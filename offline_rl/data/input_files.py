"""Listing a dataset's files safely: every data file is a regular file inside its input folder,
within a size cap, checked before anything opens it.

One function, ``list_data_files``, lists the files under an input path (or checks the path
itself when it names a file) for every reader of input files: the pipeline's checks
(``input_reader``), the messages that name a file (``input_locator``), ``inspect`` and
``convert`` (``inspection.find_data_files``). On a local disk it walks the folder itself
instead of through pyarrow's listing, which follows symlinks anywhere (and around loops) and
leaves out broken ones, FIFOs and sockets without a word. Here:

* a symlink to a file inside the input folder is read; a symlink that leads outside it is a
  ``DataFormatError`` naming both ends (the folder is what the user pointed at, so a file
  outside it was not meant to be read);
* a broken or looping symlink is skipped, and named in what the listing returns as skipped
  (the pipeline warns and counts them in ``result["data"]["skipped_files"]``);
* a directory, FIFO, socket or device whose name a data file would have (``x.parquet``) is a
  ``DataFormatError`` naming it, as is a file over ``MAX_DATA_FILE_BYTES``.

Other filesystems (S3, GCS, ABS) have no symlinks: their listing is checked for type and size.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from offline_rl.errors import DataFormatError, DataNotFoundError

#: Environment variable that overrides ``MAX_DATA_FILE_BYTES`` (a number of bytes).
MAX_DATA_FILE_BYTES_ENV = "OFFLINE_RL_MAX_DATA_FILE_BYTES"
#: The largest data file read (64 GiB unless ``OFFLINE_RL_MAX_DATA_FILE_BYTES`` says otherwise).
MAX_DATA_FILE_BYTES = 64 << 30
#: File name endings each read method reads (other methods: any name).
READ_METHOD_SUFFIXES = {"read_parquet": (".parquet",), "read_json": (".json", ".jsonl")}


@dataclass
class DataFiles:
    """What ``list_data_files`` found: the data files (sorted) and the symlinks skipped, each
    as ``"<path> (<why>)"``."""

    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_method_suffixes(read_method: object) -> tuple[str, ...] | None:
    """The file name endings ``read_method`` reads (``None``: any name)."""
    return READ_METHOD_SUFFIXES.get(read_method) if isinstance(read_method, str) else None


def max_data_file_bytes() -> int:
    """The size cap of one data file: ``OFFLINE_RL_MAX_DATA_FILE_BYTES`` when set, else
    ``MAX_DATA_FILE_BYTES``."""
    value = os.environ.get(MAX_DATA_FILE_BYTES_ENV)
    if value is None:
        return MAX_DATA_FILE_BYTES
    try:
        return int(value)
    except ValueError:
        raise DataFormatError(f"{MAX_DATA_FILE_BYTES_ENV}={value!r} is not a number of bytes; "
                              "set it to an integer such as 137438953472 (128 GiB)") from None


def list_data_files(path: str, fs: pafs.FileSystem, located: str,
                    keep: Sequence[str] | None = None, *, hidden: bool = True) -> DataFiles:
    """The data files at ``located`` on ``fs``: ``located`` itself when it is a file, else the
    files under it (recursively) whose names end with one of ``keep`` (all when ``None``),
    checked as the module says. With ``hidden=False``, names starting with ``.`` or ``_`` at
    any level are left out (temporary and metadata files, which Ray Data skips too).
    ``path`` is how the user gave the input, for messages. A missing path raises
    ``FileNotFoundError`` (a broken symlink as the path: ``DataNotFoundError``); a folder that
    cannot be listed is skipped and named.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> open(os.path.join(folder, "a.parquet"), "w").close()
        >>> os.symlink("gone.parquet", os.path.join(folder, "b.parquet"))
        >>> found = list_data_files(folder, pafs.LocalFileSystem(), folder, (".parquet",))
        >>> [os.path.basename(file) for file in found.files], len(found.skipped)
        (['a.parquet'], 1)
    """
    suffixes = tuple(keep) if keep is not None else ("",)
    if isinstance(fs, pafs.LocalFileSystem):
        return _list_local(path, located, suffixes, hidden)
    info = fs.get_file_info(located)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"{located!r} does not exist on {type(fs).__name__}")
    if info.type != pafs.FileType.Directory:
        _check_entry(info, path)
        return DataFiles([located])
    found = DataFiles()
    for entry in fs.get_file_info(pafs.FileSelector(located, recursive=True)):
        relative = entry.path[len(located.rstrip("/")) + 1:].split("/")
        if not entry.path.endswith(suffixes) or (not hidden and _is_hidden(relative)):
            continue
        if entry.type == pafs.FileType.Directory and not any(suffixes):
            continue
        _check_entry(entry, path)
        found.files.append(entry.path)
    found.files.sort()
    return found


def _is_hidden(parts: Sequence[str]) -> bool:
    return any(part.startswith((".", "_")) for part in parts)


def _check_entry(info: pafs.FileInfo, path: str) -> None:
    """A listed entry of a filesystem without symlinks: a file within the size cap."""
    if info.type != pafs.FileType.File:
        raise DataFormatError(_not_a_file(info.path, "not a regular file", path))
    _check_size(info.path, info.size or 0)


def _list_local(path: str, located: str, suffixes: tuple[str, ...],
                hidden: bool) -> DataFiles:
    """``list_data_files`` on the local disk, walking the folder without following symlinks."""
    info = os.lstat(located)
    if stat.S_ISLNK(info.st_mode):
        target = _resolve(located)
        if target is None:
            raise DataNotFoundError(f"input_={path!r} is a broken or looping symlink "
                                    f"(-> {os.readlink(located)!r}); fix the link or the path")
        located, info = target, os.stat(target)
    if not stat.S_ISDIR(info.st_mode):
        _check_local_file(located, info, path)
        return DataFiles([located])
    root = os.path.realpath(located)
    found, folders_named_as_files = DataFiles(), []
    def unlisted(error: OSError) -> None:
        found.skipped.append(f"{error.filename} (cannot be listed: {error.strerror})")

    for folder, folders, names in os.walk(located, onerror=unlisted):
        relative_folder = os.path.relpath(folder, located)
        parts = [] if relative_folder == "." else relative_folder.split(os.sep)
        for name in [*names, *folders]:
            if not hidden and _is_hidden([*parts, name]):
                continue
            file, named_as_data = os.path.join(folder, name), name.endswith(suffixes)
            entry = os.lstat(file)
            if stat.S_ISLNK(entry.st_mode):
                target = _resolve(file)
                if target is None:
                    if named_as_data:
                        found.skipped.append(f"{file} (a broken or looping symlink)")
                    continue
                entry = os.stat(target)
                if not (named_as_data or stat.S_ISDIR(entry.st_mode)):
                    continue  # not data, and not a folder Ray Data would list
                if os.path.commonpath([root, target]) != root:
                    raise DataFormatError(
                        f"{file} is a symlink to {target}, outside the input folder {path!r}; "
                        "copy the data into the folder, or list its path in input_ itself")
                if stat.S_ISDIR(entry.st_mode):
                    raise DataFormatError(
                        f"{file} is a symlink to the folder {target}, which Ray Data would "
                        "read a second time through it; remove the link")
            if stat.S_ISDIR(entry.st_mode):
                if named_as_data:
                    folders_named_as_files.append(file)
                continue
            if named_as_data:
                _check_local_file(file, entry, path)
                found.files.append(file)
    found.files.sort()
    for folder in folders_named_as_files:  # Spark writes data into such folders: fine
        if not any(file.startswith(folder + os.sep) for file in found.files):
            raise DataFormatError(_not_a_file(folder, "a folder holding no data files", path))
    return found


def _resolve(link: str) -> str | None:
    """Where ``link`` leads, or ``None`` when it is broken or loops."""
    try:
        return os.path.realpath(link, strict=True)
    except OSError:
        return None


def _check_local_file(file: str, entry: os.stat_result, path: str) -> None:
    if stat.S_ISDIR(entry.st_mode):
        raise DataFormatError(_not_a_file(file, "a folder", path))
    if not stat.S_ISREG(entry.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(entry.st_mode)
                else "a socket" if stat.S_ISSOCK(entry.st_mode) else "a device or special file")
        raise DataFormatError(_not_a_file(file, kind, path))
    _check_size(file, entry.st_size)


def _not_a_file(file: str, kind: str, path: str) -> str:
    return (f"{file} is {kind}, where input_={path!r} should hold data files; a data file must "
            "be a regular file. Move it out of the input folder or rename it")


def _check_size(file: str, size: int) -> None:
    cap = max_data_file_bytes()
    if size > cap:
        raise DataFormatError(
            f"{file} holds {size} bytes, over the cap of {cap} bytes per data file; split it "
            f"into smaller files, or raise the cap with the {MAX_DATA_FILE_BYTES_ENV} "
            "environment variable")
