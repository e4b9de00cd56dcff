"""Locating and listing a dataset's files: the one listing that every reader of input files
uses (the pipeline's checks in ``input_checks``, the messages that name a file in
``input_locator``, ``inspect`` and ``convert``), so that all of them read the same files, each
checked before anything opens it.

``list_data_files`` takes the input as the user gave it (a path, a glob, a URI, or a list of
them) and lists each path's data files by one rule on every filesystem:

* a path naming a file is that file, whatever its name; under a folder, the data files are the
  files (at any depth) whose names end with one of the read method's suffixes;
* an entry of the folder itself whose name starts with ``.`` or ``_`` is no data, nor is
  anything under it (``.offline-rl/``, ``_SUCCESS``, ``_temporary/``: as Ray Data reads a
  folder), nor is the dataset card ``dataset.json`` beside the data;
* a glob's wildcard matches no such name either unless the pattern spells it (a hidden name's
  first character: ``_*``; the card's whole name), so that ``data/*`` names the files
  ``data`` does; a glob matching nothing is a ``DataNotFoundError``, as is a missing path;
* a folder named as a data file (Spark's ``x.parquet/part-0.parquet``) is read through; one
  holding no data files is a ``DataFormatError``, as is a FIFO, socket or device named as a
  data file, or a file over ``MAX_DATA_FILE_BYTES``;
* paths with a scheme (``s3://bucket/key``) are on the filesystem it names, others on
  ``filesystem`` when given, else on the local disk.

On the local disk the folder is walked here rather than through pyarrow's listing, which follows
symlinks anywhere (and around loops) and leaves out broken ones, FIFOs and sockets without a
word. A symlink to a file inside the input folder is read; one that leads outside it, or to a
folder (which Ray Data would read twice), is a ``DataFormatError`` naming both ends; a broken
or looping one is skipped and named in what the listing returns (the pipeline warns and counts
them in ``result["data"]["dropped"]["skipped_files"]``). Other filesystems (S3, GCS, ABS) have
no symlinks.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import pyarrow.fs as pafs

from offline_rl.errors import DataFormatError, DataNotFoundError
from offline_rl.filesystems import absolute_path, filesystem_path, is_uri, without_local_scheme

#: Environment variable that overrides ``MAX_DATA_FILE_BYTES`` (a number of bytes).
MAX_DATA_FILE_BYTES_ENV = "OFFLINE_RL_MAX_DATA_FILE_BYTES"
#: The largest data file read (64 GiB unless ``OFFLINE_RL_MAX_DATA_FILE_BYTES`` says otherwise).
MAX_DATA_FILE_BYTES = 64 << 30
PARQUET_SUFFIXES = (".parquet",)
JSON_SUFFIXES = (".json", ".jsonl")
#: File name endings each read method reads (other methods: any name).
READ_METHOD_SUFFIXES = {"read_parquet": PARQUET_SUFFIXES, "read_json": JSON_SUFFIXES}
#: The dataset card ``offline-rl datasets make`` writes next to the data; never data itself.
CARD_NAME = "dataset.json"
#: First characters of the names in an input folder that are no data (nor what they hold).
HIDDEN_PREFIXES = (".", "_")
_GLOB_CHARS = frozenset("*?[")


@dataclass
class DataFiles:
    """The data files of one input path: ``path`` as the user gave it, the ``filesystem`` it is
    on and the path there (``located``), its data files (sorted, as ``filesystem`` opens them)
    and the symlinks skipped, each as ``"<file> (<why>)"``."""

    path: str
    filesystem: pafs.FileSystem
    located: str
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def shown(self, file: str) -> str:
        """``file`` as the user would name it: under ``path`` (``s3://bucket/key/x.parquet``,
        ``data/x.parquet`` for the input ``data``)."""
        inside = file == self.located or file.startswith(self.located.rstrip("/") + "/")
        return self.path.rstrip("/") + file[len(self.located.rstrip("/")):] if inside else file


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


def input_paths(input_: str | os.PathLike | Sequence[str | os.PathLike],
                filesystem: pafs.FileSystem | None = None) -> list[str]:
    """``input_`` as a list of paths, globs (``*``, ``?``, ``[...]``) expanded and sorted.

    Without a filesystem, local globs are expanded and URIs are kept as they are (Ray Data
    resolves them); with one, every path is on that filesystem and globs are matched against
    its listing (scheme kept). A wildcard matches no name starting with ``.`` or ``_`` unless
    the pattern spells that character, nor the card ``dataset.json``. A glob matching nothing
    is an error.

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> for name in ("b.parquet", "a.parquet", "_SUCCESS", "_b.parquet", "dataset.json"):
        ...     open(os.path.join(folder, name), "w").close()
        >>> [os.path.basename(path) for path in input_paths(f"{folder}/*")]
        ['a.parquet', 'b.parquet']
        >>> [os.path.basename(path) for path in input_paths(f"{folder}/_*.parquet")]
        ['_b.parquet']
    """
    items = [input_] if isinstance(input_, str | os.PathLike) else list(input_)
    paths: list[str] = []
    for item in items:
        path = without_local_scheme(os.fspath(item))
        if not _GLOB_CHARS & set(path) or (filesystem is None and is_uri(path)):
            paths.append(path)
            continue
        matches = (_glob_local(path) if filesystem is None
                   else _glob_filesystem(path, filesystem))
        if not matches:
            raise DataNotFoundError(f"input_ pattern {path!r} matches no files or folders; fix "
                                    "the pattern or list the paths")
        paths.extend(matches)
    return paths


def _spelled(name: str, part: str) -> bool:
    """Whether the pattern ``part`` matches ``name``; a name that is no data only when ``part``
    spells it (a hidden name's first character, the card's whole name)."""
    if not fnmatchcase(name, part):
        return False
    if name == CARD_NAME:
        return part == CARD_NAME
    return not name.startswith(HIDDEN_PREFIXES) or part.startswith(name[0])


def _glob_local(pattern: str) -> list[str]:
    if os.path.exists(pattern):  # a file whose name has a glob character
        return [pattern]
    parts = pattern.split(os.sep)
    return sorted(match for match in glob.glob(pattern, recursive=True)
                  if all(any(_spelled(name, part) for part in parts)
                         for name in match.split(os.sep) if _no_data(name)))


def _glob_filesystem(pattern: str, filesystem: pafs.FileSystem) -> list[str]:
    """Files and folders on ``filesystem`` matching ``pattern`` part by part (``*`` stays
    within one folder level)."""
    located = filesystem_path(pattern, filesystem)
    if filesystem.get_file_info(located).type != pafs.FileType.NotFound:
        return [pattern]  # a file whose name has a glob character
    scheme, parts = pattern[: len(pattern) - len(located)], located.split("/")
    first = next(i for i, part in enumerate(parts) if _GLOB_CHARS & set(part))
    selector = pafs.FileSelector("/".join(parts[:first]), allow_not_found=True,
                                 recursive=first < len(parts) - 1)
    return sorted(
        scheme + info.path for info in filesystem.get_file_info(selector)
        if len(info.path.split("/")) == len(parts)
        and all(_spelled(name, part) for name, part in zip(info.path.split("/"), parts))
    )


def locate(path: str, filesystem: pafs.FileSystem | None = None
           ) -> tuple[pafs.FileSystem, str]:
    """The filesystem ``path`` is on and the path as that filesystem names it: ``filesystem``
    when given (a scheme is dropped), else the one a URI's scheme names, else the local disk
    (the path made absolute).

    Examples:
        >>> fs, located = locate("s3://bucket/data", pafs.LocalFileSystem())
        >>> type(fs).__name__, located
        ('LocalFileSystem', 'bucket/data')
    """
    if filesystem is not None:
        return filesystem, filesystem_path(path, filesystem)
    if is_uri(path):
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), absolute_path(path)


def list_data_files(input_: str | os.PathLike | Sequence[str | os.PathLike],
                    filesystem: pafs.FileSystem | None = None,
                    suffixes: Sequence[str] | None = None) -> list[DataFiles]:
    """The data files of each path of ``input_`` (globs expanded: ``input_paths``), on
    ``filesystem`` (``locate``): the path itself when it is a file, else the files under it
    whose names end with one of ``suffixes`` (any name when ``None``), by the module's rules.
    A missing path raises ``DataNotFoundError``, as does one the filesystem cannot read; a
    folder that cannot be listed is skipped and named.

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> os.mkdir(os.path.join(folder, ".offline-rl"))
        >>> for name in ("a.parquet", "dataset.json", "_SUCCESS", ".offline-rl/run.json"):
        ...     open(os.path.join(folder, name), "w").close()
        >>> os.symlink("gone.parquet", os.path.join(folder, "b.parquet"))
        >>> (found,) = list_data_files(folder, suffixes=(".parquet", ".json"))
        >>> [os.path.basename(file) for file in found.files], len(found.skipped)
        (['a.parquet'], 1)
    """
    keep = tuple(suffixes) if suffixes is not None else ("",)
    listing = []
    for path in input_paths(input_, filesystem):
        fs, located = locate(path, filesystem)
        found = DataFiles(path, fs, located)
        try:
            lister = _list_local if isinstance(fs, pafs.LocalFileSystem) else _list_other
            folders_named_as_files = lister(found, keep)
        except DataNotFoundError:
            raise
        except FileNotFoundError as error:
            raise DataNotFoundError(_not_found(path, fs)) from error
        except OSError as error:
            raise DataNotFoundError(
                f"cannot read input_={path!r} through {type(fs).__name__}: {error}. Check the "
                "path and input_filesystem_kwargs (endpoint, credentials, region)") from error
        found.files.sort()
        for folder in folders_named_as_files:  # Spark writes data into such folders: fine
            if not any(file.startswith(folder.rstrip("/") + "/") for file in found.files):
                raise DataFormatError(_not_a_file(folder, "a folder holding no data files",
                                                  path))
        listing.append(found)
    return listing


def _not_found(path: str, fs: pafs.FileSystem) -> str:
    if isinstance(fs, pafs.LocalFileSystem):
        return (f"input_={path!r} does not exist; record a dataset first "
                "(offline-rl datasets make ...) or fix the path")
    return (f"input_={path!r} does not exist on {type(fs).__name__} (no such bucket, key or "
            "prefix); fix the path or input_filesystem_kwargs")


def _no_data(relative: str) -> bool:
    """Whether an entry of an input folder (its path relative to the folder) is no data."""
    return relative.startswith(HIDDEN_PREFIXES) or relative == CARD_NAME


def _list_other(found: DataFiles, suffixes: tuple[str, ...]) -> list[str]:
    """Lists ``found`` on a filesystem without symlinks (S3, GCS, ABS); returns the folders
    named as data files."""
    fs, located = found.filesystem, found.located
    info = fs.get_file_info(located)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"{located!r} does not exist on {type(fs).__name__}")
    if info.type != pafs.FileType.Directory:
        _check_entry(info, found.path)
        found.files.append(located)
        return []
    folders = []
    for entry in fs.get_file_info(pafs.FileSelector(located, recursive=True)):
        if _no_data(entry.path[len(located.rstrip("/")) + 1:]) or not entry.path.endswith(
                suffixes):
            continue
        if entry.type == pafs.FileType.Directory:
            if any(suffixes):
                folders.append(entry.path)
            continue
        _check_entry(entry, found.path)
        found.files.append(entry.path)
    return folders


def _check_entry(info: pafs.FileInfo, path: str) -> None:
    """A listed entry of a filesystem without symlinks: a file within the size cap."""
    if info.type != pafs.FileType.File:
        raise DataFormatError(_not_a_file(info.path, "not a regular file", path))
    _check_size(info.path, info.size or 0)


def _list_local(found: DataFiles, suffixes: tuple[str, ...]) -> list[str]:
    """Lists ``found`` on the local disk, walking the folder without following symlinks;
    returns the folders named as data files."""
    path, located = found.path, found.located
    info = os.lstat(located)
    if stat.S_ISLNK(info.st_mode):
        target = _resolve(located)
        if target is None:
            raise DataNotFoundError(f"input_={path!r} is a broken or looping symlink "
                                    f"(-> {os.readlink(located)!r}); fix the link or the path")
        located, info = target, os.stat(target)
    if not stat.S_ISDIR(info.st_mode):
        _check_local_file(located, info, path)
        found.files.append(located)
        return []
    root, folders_named_as_files = os.path.realpath(located), []
    def unlisted(error: OSError) -> None:
        found.skipped.append(f"{error.filename} (cannot be listed: {error.strerror})")

    for folder, folders, names in os.walk(located, onerror=unlisted):
        if folder == located:  # the entries of the input folder that are no data
            folders[:] = [name for name in folders if not _no_data(name)]
            names = [name for name in names if not _no_data(name)]
        for name in [*names, *folders]:
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
                if named_as_data and any(suffixes):
                    folders_named_as_files.append(file)
                continue
            if named_as_data:
                _check_local_file(file, entry, path)
                found.files.append(file)
    return folders_named_as_files


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
