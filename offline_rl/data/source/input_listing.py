"""``InputListing``: the input's files, listed once and carried with the ``DataConfig``.

``DataConfig.input_listing`` lists the input the first time it is asked (``check_input``, in
the driver, before any Ray work); every later reader of the files (the footers' and the first
rows' checks, the multi-agent ids, the read itself, and the PreLearners' messages that name a
file) reads that same listing, which travels with the config to the PreLearner actors. URIs
without a filesystem are left to Ray Data, which resolves them itself; only a message naming a
damaged file lists them (``data_files(with_uris=True)``), on the way to the error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs

from offline_rl.data.source.input_files import DataFiles, input_paths, list_data_files
from offline_rl.filesystems import is_uri


@dataclass(frozen=True)
class InputListing:
    """The input's paths (globs expanded), each one's ``DataFiles`` (all but the URIs left to
    Ray Data) and the file name endings listed (``None``: any name).

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> for name in ("b.parquet", "a.parquet", "_SUCCESS"):
        ...     open(os.path.join(folder, name), "w").close()
        >>> listing = InputListing.of([folder, "s3://bucket/more"], None, (".parquet",))
        >>> [os.path.basename(file) for file in listing.read_files()[:2]], listing.read_files()[2]
        (['a.parquet', 'b.parquet'], 's3://bucket/more')
    """

    filesystem: pafs.FileSystem | None
    paths: list[str]
    found: list[DataFiles]
    suffixes: tuple[str, ...] | None

    @classmethod
    def of(cls, input_: str | os.PathLike | Sequence[str | os.PathLike],
           filesystem: pafs.FileSystem | None,
           suffixes: tuple[str, ...] | None) -> InputListing:
        """Lists ``input_`` (``list_data_files``) on ``filesystem``, keeping the files whose
        names end with one of ``suffixes``."""
        paths = input_paths(input_, filesystem)
        return cls(filesystem, paths, list_data_files(
            [path for path in paths if not _left_to_ray_data(path, filesystem)], filesystem,
            suffixes), suffixes)

    @property
    def skipped(self) -> list[str]:
        """The files skipped (broken or looping symlinks, folders that cannot be listed), each
        as ``"<file> (<why>)"``."""
        return [entry for found in self.found for entry in found.skipped]

    def read_files(self) -> list[str]:
        """What Ray Data reads, in the order of the paths: each listed path's data files as the
        user names them (``DataFiles.shown``), and the URIs left to Ray Data as they are; the
        paths themselves for a read method of any file names (``suffixes`` ``None``: Ray Data
        lists them as that method reads folders)."""
        if self.suffixes is None:
            return list(self.paths)
        listed = {found.path: found for found in self.found}
        return [file for path in self.paths
                for file in ([listed[path].shown(name) for name in listed[path].files]
                             if path in listed else [path])]

    def data_files(self, *, with_uris: bool = False) -> Iterator[tuple[str, pafs.FileSystem, str]]:
        """``(shown, filesystem, path)`` of each data file listed: ``shown`` as the user names
        it, ``path`` as ``filesystem`` opens it. ``with_uris``: the URIs left to Ray Data too,
        listed now."""
        found = list(self.found)
        if with_uris:
            found += list_data_files([path for path in self.paths
                                      if _left_to_ray_data(path, self.filesystem)],
                                     self.filesystem, self.suffixes)
        for listed in found:
            for file in listed.files:
                yield listed.shown(file), listed.filesystem, file


def _left_to_ray_data(path: str, filesystem: pafs.FileSystem | None) -> bool:
    """Whether Ray Data lists ``path`` itself: a URI read without a filesystem."""
    return filesystem is None and is_uri(path)
