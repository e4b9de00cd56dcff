"""Output folders offline-rl writes into, and the manifests that say which files are its own.

Every writer (``datasets make``, recording, ``convert``) lists the files it wrote in a manifest
of its own, ``<folder>/.offline-rl/<run id>.json`` (hidden: Ray Data and pyarrow skip names
starting with ``.``), replaced atomically after each write. One manifest per run (per recording
actor), so two runs writing into one folder at once never race over a shared file; run ids are
part of the data files' names, so a run never replaces another run's files.

A folder that holds files no manifest lists (the user's) is refused unless the caller passes
``overwrite``; even then only files a manifest lists are ever replaced or deleted, and data
files kept beside the new ones (a dataset an older offline-rl wrote, without a manifest) are
named in a warning, since readers of the folder will read them too.

Examples:
    >>> import tempfile, pyarrow.fs as pafs
    >>> folder, fs = tempfile.mkdtemp(), pafs.LocalFileSystem()
    >>> _ = open(f"{folder}/notes.txt", "w").write("mine")
    >>> try:
    ...     claim_output_folder(folder, fs, folder, writer="datasets make")
    ... except OutputError as error:
    ...     print("holds 1 file offline-rl did not write (notes.txt)" in str(error))
    True
    >>> claim_output_folder(folder, fs, folder, writer="datasets make", overwrite=True)
    set()
"""

from __future__ import annotations

import json
import os
import time
import uuid
import warnings
from collections.abc import Iterable
from pathlib import PurePosixPath

import pyarrow.fs as pafs

from offline_rl.errors import OutputError

#: The hidden folder holding the manifests (and a run's staging files) inside an output folder.
MANIFEST_FOLDER = ".offline-rl"
#: Manifests larger than this are not read (their files then count as the user's).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: Foreign files an error names before it gives the count of the rest.
NAMED_FILES = 5
#: Names of files a reader of the folder takes for data (those ``offline_rl.inspection`` reads;
#: ``overwrite`` warns when it keeps any).
DATA_SUFFIXES = (".parquet", ".json", ".jsonl")


def new_run_id() -> str:
    """A run id that sorts by start time and is unique across processes: ``20261126-064512-
    a1b2c3``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def claim_output_folder(output: str, filesystem: pafs.FileSystem, folder: str, *, writer: str,
                        overwrite: bool = False, replaces: bool = True) -> set[str]:
    """Checks that ``writer`` (the command or API, for messages) may write into ``folder``
    (``output`` as the user named it) and creates it; returns the files (relative paths)
    offline-rl wrote there earlier.

    Raises ``OutputError`` when ``folder`` is a file or cannot be written; when it holds files
    no manifest lists, unless ``overwrite``; and when ``replaces`` (the writer replaces the
    folder's earlier output: a dataset, a conversion) and it holds offline-rl's files from an
    earlier run, unless ``overwrite``."""
    how = ("rerun with --overwrite (Python: overwrite=True) or choose a new or empty folder; "
           "only files offline-rl wrote are ever replaced")
    info = filesystem.get_file_info(folder)
    if info.type == pafs.FileType.File:
        raise OutputError(f"{writer}: output {output!r} is a file, not a folder; name a folder "
                          "(new or empty) to write into")
    exists = info.type != pafs.FileType.NotFound
    owned = owned_files(filesystem, folder) if exists else set()
    foreign = sorted(set(_entries(filesystem, folder)) - owned) if exists else []
    if foreign and not overwrite:
        raise OutputError(f"{writer}: output {output!r} holds {_count(len(foreign))} offline-rl "
                          f"did not write ({some_paths(foreign)}); {how}")
    if replaces and owned and not overwrite:
        raise OutputError(
            f"{writer}: output {output!r} holds the output of an earlier offline-rl run "
            f"({_count(len(owned))}: {some_paths(sorted(owned))}); {how}")
    kept_data = [path for path in foreign if path.endswith(DATA_SUFFIXES)
                 and not any(part.startswith((".", "_")) for part in path.split("/"))]
    if kept_data:
        warnings.warn(f"{writer}: output {output!r} keeps {_count(len(kept_data))} of data "
                      f"offline-rl did not write ({some_paths(kept_data)}); whatever reads the "
                      "folder reads them too", UserWarning, stacklevel=3)
    _check_writable(output, filesystem, folder, writer)
    return owned


def write_manifest(filesystem: pafs.FileSystem, folder: str, run_name: str,
                   files: Iterable[str]) -> None:
    """Lists ``files`` (paths relative to ``folder``) as written by run ``run_name``, replacing
    its earlier manifest atomically (written under a temporary name, then moved)."""
    manifests = f"{folder}/{MANIFEST_FOLDER}"
    filesystem.create_dir(manifests, recursive=True)
    temporary = f"{manifests}/{run_name}.{uuid.uuid4().hex}.tmp"
    with filesystem.open_output_stream(temporary) as stream:
        stream.write(json.dumps({"files": sorted(files)}, indent=1).encode())
    filesystem.move(temporary, f"{manifests}/{run_name}.json")


def owned_files(filesystem: pafs.FileSystem, folder: str) -> set[str]:
    """The files (relative to ``folder``) its manifests list; entries that would leave the
    folder, and manifests that cannot be read, are ignored."""
    owned: set[str] = set()
    for manifest in _manifests(filesystem, folder):
        owned.update(_manifest_files(filesystem, manifest))
    return owned


def remove_earlier_output(filesystem: pafs.FileSystem, folder: str, *, keep_run: str) -> None:
    """Deletes the files every manifest but ``keep_run``'s lists (those runs' own files, never
    one the kept run also lists), then those manifests and the folders left empty."""
    kept_manifest = f"{folder}/{MANIFEST_FOLDER}/{keep_run}.json"
    kept = set(_manifest_files(filesystem, kept_manifest))
    emptied: set[str] = set()
    for manifest in _manifests(filesystem, folder):
        if manifest.path == kept_manifest:
            continue
        for relative in set(_manifest_files(filesystem, manifest)) - kept:
            path = f"{folder}/{relative}"
            if (_stays_inside(filesystem, folder, path)
                    and filesystem.get_file_info(path).type == pafs.FileType.File):
                filesystem.delete_file(path)
                emptied.update(_parents(relative))
        filesystem.delete_file(manifest.path)
    for relative in sorted(emptied, key=len, reverse=True):  # deepest first
        path = f"{folder}/{relative}"
        if not filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
            filesystem.delete_dir(path)


def _stays_inside(filesystem: pafs.FileSystem, folder: str, path: str) -> bool:
    """Whether ``path`` is inside ``folder`` once local symbolic links are followed (a listed
    file under a linked folder could be elsewhere)."""
    if not isinstance(filesystem, pafs.LocalFileSystem):
        return True
    parent = os.path.realpath(os.path.dirname(path))
    return os.path.commonpath([parent, os.path.realpath(folder)]) == os.path.realpath(folder)


def _check_writable(output: str, filesystem: pafs.FileSystem, folder: str, writer: str) -> None:
    """Creates ``folder`` and its manifest folder and writes a probe file there (removed again),
    so that a location that cannot be written fails before any work."""
    probe = f"{folder}/{MANIFEST_FOLDER}/.probe-{uuid.uuid4().hex}"
    try:
        filesystem.create_dir(f"{folder}/{MANIFEST_FOLDER}", recursive=True)
        with filesystem.open_output_stream(probe):
            pass
        filesystem.delete_file(probe)
    except OSError as error:
        raise OutputError(f"{writer}: cannot write into output {output!r} ({error}); make it "
                          "writable or choose another folder") from None


def _entries(filesystem: pafs.FileSystem, folder: str) -> list[str]:
    """Every file and empty folder (with a trailing ``/``) under ``folder``, relative to it;
    the manifest folder left out."""
    relatives = {info.path[len(folder.rstrip("/")) + 1:]: info.type for info in
                 filesystem.get_file_info(pafs.FileSelector(folder, recursive=True))}
    relatives = {path: kind for path, kind in relatives.items()
                 if path.split("/", 1)[0] != MANIFEST_FOLDER}
    parents = {parent for path in relatives for parent in _parents(path)}
    return [path if kind != pafs.FileType.Directory else f"{path}/"
            for path, kind in relatives.items()
            if kind != pafs.FileType.Directory or path not in parents]


def _manifests(filesystem: pafs.FileSystem, folder: str) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(f"{folder}/{MANIFEST_FOLDER}", allow_not_found=True)
    return sorted((info for info in filesystem.get_file_info(selector)
                   if info.type == pafs.FileType.File and info.path.endswith(".json")),
                  key=lambda info: info.path)


def _manifest_files(filesystem: pafs.FileSystem, manifest: pafs.FileInfo | str) -> list[str]:
    info = filesystem.get_file_info(manifest) if isinstance(manifest, str) else manifest
    if info.type != pafs.FileType.File or (info.size or 0) > MAX_MANIFEST_BYTES:
        return []
    try:
        with filesystem.open_input_stream(info.path) as stream:
            files = json.loads(stream.read()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [file for file in files if isinstance(file, str) and _inside(file)]


def _inside(relative: str) -> bool:
    parts = PurePosixPath(relative).parts
    return (bool(parts) and not relative.startswith("/") and ".." not in parts
            and parts[0] != MANIFEST_FOLDER and "\\" not in relative)


def _parents(relative: str) -> list[str]:
    parts = relative.split("/")[:-1]
    return ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]


def _count(number: int) -> str:
    return f"{number} file{'s' if number != 1 else ''}"


def some_paths(paths: list[str]) -> str:
    """The first ``NAMED_FILES`` of ``paths``, then how many more there are."""
    named = ", ".join(paths[:NAMED_FILES])
    return named if len(paths) <= NAMED_FILES else f"{named} and {len(paths) - NAMED_FILES} more"
