"""Manifests: the lists of files offline-rl wrote into an output folder, with each file's size
and SHA-256, so that a file is replaced only once its content proves offline-rl wrote it.

A run (one recording actor, one ``datasets make``, one ``convert``) lists its files in
``<folder>/.offline-rl/<run name>.json`` (hidden: Ray Data and pyarrow skip names starting with
``.``), replaced atomically each time the run adds files. A manifest is data from disk like any
other: one that is too large, not offline-rl's format, or a symbolic link proves nothing, and
an entry proves a file offline-rl's only while the file is a regular file inside the folder whose
size and SHA-256 are still those offline-rl recorded when it wrote it. A manifest forged or edited
to list the user's files therefore cannot make offline-rl replace them: the user's content does
not have the hash a forger would have to compute from it, and whoever can compute it can
already delete the file.

Examples:
    >>> import tempfile, pyarrow.fs as pafs
    >>> folder, fs = tempfile.mkdtemp(), pafs.LocalFileSystem()
    >>> _ = open(f"{folder}/part-0.json", "w").write("{}")
    >>> RunManifest(fs, folder, "run-1").add(["part-0.json"])
    >>> (manifest,) = read_manifests(fs, folder)
    >>> manifest.entries["part-0.json"].size, unproven_reason(fs, folder, manifest.entries[
    ...     "part-0.json"])
    (2, None)
    >>> _ = open(f"{folder}/part-0.json", "w").write("[]")
    >>> unproven_reason(fs, folder, manifest.entries["part-0.json"])
    'its content is not what offline-rl wrote (edited or replaced since)'
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import pyarrow.fs as pafs

#: The hidden folder holding the manifests (and a run's staging files) inside an output folder.
MANIFEST_FOLDER = ".offline-rl"
#: The manifests' format: ``{"format": ..., "version": ..., "files": {path: {size, sha256}}}``.
MANIFEST_FORMAT, MANIFEST_VERSION = "offline-rl manifest", 2
#: Manifests larger than this are not read (their files then count as the user's): room for
#: about 60,000 files per run.
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ManifestEntry:
    """One file a manifest lists: its path relative to the folder, size and SHA-256."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A manifest found in a folder: its path, its entries, and why it cannot be used (then
    ``entries`` is empty and its files count as the user's)."""

    path: str
    entries: Mapping[str, ManifestEntry]
    problem: str | None = None


class RunManifest:
    """The manifest of run ``run_name`` in ``folder``: ``add`` hashes the files the run has just
    written (paths relative to ``folder``) and rewrites the manifest atomically (written under a
    temporary name, then moved)."""

    def __init__(self, filesystem: pafs.FileSystem, folder: str, run_name: str):
        self.filesystem, self.folder, self.run_name = filesystem, folder.rstrip("/"), run_name
        self.entries: dict[str, ManifestEntry] = {}

    def add(self, files: Iterable[str]) -> None:
        """Lists ``files``, hashing each as it is now."""
        self.add_entries(file_entry(self.filesystem, self.folder, file) for file in files)

    def add_entries(self, entries: Iterable[ManifestEntry]) -> None:
        """Lists files whose size and hash the caller already knows (files it moved here)."""
        listed = {**self.entries, **{entry.path: entry for entry in entries}}
        manifests = f"{self.folder}/{MANIFEST_FOLDER}"
        self.filesystem.create_dir(manifests, recursive=True)
        temporary = f"{manifests}/{self.run_name}.{uuid.uuid4().hex}.tmp"
        content = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "files": {
            path: {"size": entry.size, "sha256": entry.sha256}
            for path, entry in sorted(listed.items())}}
        with self.filesystem.open_output_stream(temporary) as stream:
            stream.write(json.dumps(content, indent=1).encode())
        self.filesystem.move(temporary, f"{manifests}/{self.run_name}.json")
        self.entries = listed


def file_entry(filesystem: pafs.FileSystem, folder: str, relative: str) -> ManifestEntry:
    """``relative``'s entry: its size and SHA-256, read from ``folder`` on ``filesystem``."""
    digest, size = hashlib.sha256(), 0
    with filesystem.open_input_stream(f"{folder.rstrip('/')}/{relative}") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return ManifestEntry(relative, size, digest.hexdigest())


def read_manifests(filesystem: pafs.FileSystem, folder: str) -> list[Manifest]:
    """Every manifest in ``folder``'s manifest folder (none when it does not exist), each with
    its entries or the reason it cannot be used."""
    selector = pafs.FileSelector(f"{folder.rstrip('/')}/{MANIFEST_FOLDER}", allow_not_found=True)
    return [_read(filesystem, info) for info in sorted(
        filesystem.get_file_info(selector), key=lambda info: info.path)
        if info.path.endswith(".json") and info.type != pafs.FileType.Directory]


def manifest_folder_link(filesystem: pafs.FileSystem, folder: str) -> str | None:
    """Where ``folder``'s manifest folder points when it is a symbolic link (offline-rl never
    reads, writes or deletes through one), else ``None``."""
    path = f"{folder.rstrip('/')}/{MANIFEST_FOLDER}"
    if isinstance(filesystem, pafs.LocalFileSystem) and os.path.islink(path):
        return os.readlink(path)
    return None


def unproven_reason(filesystem: pafs.FileSystem, folder: str, entry: ManifestEntry,
                    size: int | None = None) -> str | None:
    """``None`` when the file ``entry`` lists is offline-rl's: a regular file inside ``folder``
    with the size and SHA-256 recorded; else why it is not (the file is then kept). ``size``:
    the file's size when the caller has listed it already. A file that no longer exists is
    ``"gone"``."""
    path = f"{folder.rstrip('/')}/{entry.path}"
    if isinstance(filesystem, pafs.LocalFileSystem):
        if not _stays_inside(folder, path):
            return "it is reached through a symbolic link that leaves the folder"
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            return "gone"
        if not stat.S_ISREG(status.st_mode):
            return "it is not a regular file (a symbolic link, a folder or a device)"
        size = status.st_size
    elif size is None:
        info = filesystem.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return "gone"
        if info.type != pafs.FileType.File:
            return "it is not a regular file"
        size = info.size
    if size != entry.size:
        return f"its size is {size} bytes, not the {entry.size} offline-rl wrote"
    if file_entry(filesystem, folder, entry.path).sha256 != entry.sha256:
        return "its content is not what offline-rl wrote (edited or replaced since)"
    return None


def _read(filesystem: pafs.FileSystem, info: pafs.FileInfo) -> Manifest:
    if isinstance(filesystem, pafs.LocalFileSystem) and os.path.islink(info.path):
        return Manifest(info.path, {}, "it is a symbolic link")
    if info.type != pafs.FileType.File:
        return Manifest(info.path, {}, "it is not a regular file")
    if (info.size or 0) > MAX_MANIFEST_BYTES:
        return Manifest(info.path, {}, f"it is {info.size:,} bytes, more than the "
                        f"{MAX_MANIFEST_BYTES:,} a manifest may have")
    try:
        with filesystem.open_input_stream(info.path) as stream:
            content = json.loads(stream.read(MAX_MANIFEST_BYTES + 1))
    except (OSError, ValueError) as error:
        return Manifest(info.path, {}, f"it cannot be read ({error})")
    if not (isinstance(content, dict) and content.get("format") == MANIFEST_FORMAT
            and content.get("version") == MANIFEST_VERSION
            and isinstance(content.get("files"), dict)):
        return Manifest(info.path, {}, "it is not in the format offline-rl writes (files with "
                        "their sizes and SHA-256 hashes)")
    entries, bad = {}, 0
    for path, listed in content["files"].items():
        if (_inside(path) and isinstance(listed, dict)
                and isinstance(listed.get("size"), int) and not isinstance(listed["size"], bool)
                and isinstance(listed.get("sha256"), str) and len(listed["sha256"]) == 64):
            entries[path] = ManifestEntry(path, listed["size"], listed["sha256"])
        else:
            bad += 1
    if bad:
        return Manifest(info.path, {}, f"{bad} of its entries are not files inside the folder "
                        "with a size and a SHA-256 hash")
    return Manifest(info.path, entries)


def _inside(relative: object) -> bool:
    if not isinstance(relative, str):
        return False
    parts = PurePosixPath(relative).parts
    return (bool(parts) and not relative.startswith("/") and ".." not in parts
            and parts[0] != MANIFEST_FOLDER and "\\" not in relative)


def _stays_inside(folder: str, path: str) -> bool:
    """Whether ``path``'s folder is inside ``folder`` once symbolic links are followed."""
    parent, root = os.path.realpath(os.path.dirname(path)), os.path.realpath(folder)
    return os.path.commonpath([parent, root]) == root
