"""Output folders offline-rl writes into: which files there are its own, and replacing them.

Every writer (``datasets make``, recording, ``convert``) lists the files it wrote in a manifest
of its run (``offline_rl.recording.manifests``), with each file's size and SHA-256; run ids are
part of the data files' names, so a run never replaces another run's files.

A folder that holds files no manifest lists (the user's) is refused unless the caller passes
``overwrite``; even then a file is replaced or deleted only when its content still proves that
offline-rl wrote it, files a forged, edited or unreadable manifest lists are kept and named in a
warning, a manifest folder that is a symbolic link is refused, and data files kept beside the
new ones (a dataset an older offline-rl wrote, without a manifest) are named in a warning, since
readers of the folder will read them too.

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

import os
import shutil
import time
import uuid
import warnings

import pyarrow.fs as pafs

from offline_rl.errors import OutputError
from offline_rl.recording.manifests import (
    MANIFEST_FOLDER,
    Manifest,
    manifest_folder_link,
    read_manifests,
    unproven_reason,
)

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
    link = manifest_folder_link(filesystem, folder)
    if link is not None:
        raise OutputError(f"{writer}: {output.rstrip('/')}/{MANIFEST_FOLDER} is a symbolic link "
                          f"(to {link!r}); offline-rl never writes, reads or deletes through "
                          "one: remove the link itself (its target is not touched) or choose "
                          "another folder")
    exists = info.type != pafs.FileType.NotFound
    sizes = _entries(filesystem, folder) if exists else {}
    manifests = read_manifests(filesystem, folder) if exists else []
    owned = _listed(manifests, sizes)
    foreign = sorted(set(sizes) - owned)
    if foreign and not overwrite:
        raise OutputError(f"{writer}: output {output!r} holds {_count(len(foreign))} offline-rl "
                          f"did not write ({some_paths(foreign)}){_unusable(manifests)}; {how}")
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


def owned_files(filesystem: pafs.FileSystem, folder: str) -> set[str]:
    """The files (relative to ``folder``) its manifests list with the size they have now; only
    their hashes, checked before a file is replaced, prove them offline-rl's."""
    return _listed(read_manifests(filesystem, folder), _entries(filesystem, folder))


def remove_earlier_output(filesystem: pafs.FileSystem, folder: str, *, keep_run: str,
                          writer: str) -> list[str]:
    """Deletes the files every manifest but ``keep_run``'s lists (never one the kept run also
    lists) whose content proves offline-rl wrote them, then each manifest whose files are all
    gone, and the folders left empty. Every file kept, and every manifest not used, is named in
    a warning with the reason; returns them."""
    kept_manifest = f"{folder}/{MANIFEST_FOLDER}/{keep_run}.json"
    manifests = read_manifests(filesystem, folder)
    new = {path for manifest in manifests if manifest.path == kept_manifest
           for path in manifest.entries}
    kept: list[str] = []
    emptied: set[str] = set()
    for manifest in manifests:
        if manifest.path == kept_manifest:
            continue
        if manifest.problem:
            kept.append(f"{_relative(folder, manifest.path)} (not used: {manifest.problem}; "
                        "no file it lists was deleted)")
            continue
        whole = True
        for relative, entry in sorted(manifest.entries.items()):
            reason = None if relative in new else unproven_reason(filesystem, folder, entry)
            if reason is None and relative not in new:
                filesystem.delete_file(f"{folder}/{relative}")
                emptied.update(_parents(relative))
            elif reason not in (None, "gone"):
                kept.append(f"{relative} ({reason})")
                whole = False
        if whole:
            filesystem.delete_file(manifest.path)
    for relative in sorted(emptied, key=len, reverse=True):  # deepest first
        path = f"{folder}/{relative}"
        if not filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
            filesystem.delete_dir(path)
    if kept:
        more = f" and {len(kept) - NAMED_FILES} more" if len(kept) > NAMED_FILES else ""
        warnings.warn(f"{writer}: in {folder!r}, replaced only the earlier output offline-rl can "
                      f"prove it wrote and kept {'; '.join(kept[:NAMED_FILES])}{more}; delete "
                      "what you do not need yourself", UserWarning, stacklevel=3)
    return kept


def write_failure(writer: str, output: str, error: OSError, *, kept: str,
                  needed_bytes: int | None = None) -> OutputError:
    """The error for a write into ``output`` that failed (a full disk, a file over the size
    limit): the folder, what was kept (``kept``: whole files only), the space free on its disk
    (a local folder) and, where known, the bytes being written."""
    space = f" It was writing about {needed_bytes / 2**20:.1f} MiB" if needed_bytes else ""
    free = _free_bytes(output)
    if free is not None:
        space += f"{'; ' if space else ' '}{free / 2**20:.1f} MiB are free on the folder's disk"
    return OutputError(f"{writer}: writing into {output!r} failed ({error}); {kept}."
                       f"{space + '.' if space else ''} Free space (or raise the file size "
                       "limit) and write again, or choose another folder")


def _free_bytes(output: str) -> int | None:
    """The free bytes on a local folder's disk (its nearest existing parent's), else ``None``."""
    if "://" in output and not output.startswith("file://"):
        return None
    path = os.path.abspath(output.removeprefix("file://"))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


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


def _entries(filesystem: pafs.FileSystem, folder: str) -> dict[str, int | None]:
    """Every file (with its size) and empty folder (with a trailing ``/``) under ``folder``,
    relative to it; the manifest folder left out."""
    relatives = {info.path[len(folder.rstrip("/")) + 1:]: info for info in
                 filesystem.get_file_info(pafs.FileSelector(folder, recursive=True))}
    relatives = {path: info for path, info in relatives.items()
                 if path.split("/", 1)[0] != MANIFEST_FOLDER}
    parents = {parent for path in relatives for parent in _parents(path)}
    return {path if info.type != pafs.FileType.Directory else f"{path}/": info.size
            for path, info in relatives.items()
            if info.type != pafs.FileType.Directory or path not in parents}


def _listed(manifests: list[Manifest], sizes: dict[str, int | None]) -> set[str]:
    return {path for manifest in manifests for path, entry in manifest.entries.items()
            if sizes.get(path, -1) == entry.size}


def _unusable(manifests: list[Manifest]) -> str:
    """A note on the first manifest that cannot be used, for a refusal's message."""
    unusable = [manifest for manifest in manifests if manifest.problem]
    if not unusable:
        return ""
    name = unusable[0].path.rsplit("/", 1)[-1]
    more = f" and {len(unusable) - 1} more" if len(unusable) > 1 else ""
    return (f"; {MANIFEST_FOLDER}/{name}{more} cannot prove any file offline-rl's "
            f"({unusable[0].problem})")


def _relative(folder: str, path: str) -> str:
    return path[len(folder.rstrip("/")) + 1:]


def _parents(relative: str) -> list[str]:
    parts = relative.split("/")[:-1]
    return ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]


def _count(number: int) -> str:
    return f"{number} file{'s' if number != 1 else ''}"


def some_paths(paths: list[str]) -> str:
    """The first ``NAMED_FILES`` of ``paths``, then how many more there are."""
    named = ", ".join(paths[:NAMED_FILES])
    return named if len(paths) <= NAMED_FILES else f"{named} and {len(paths) - NAMED_FILES} more"
