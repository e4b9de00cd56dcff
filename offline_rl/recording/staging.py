"""``StagedFile``: a data file written under a hidden staging name and moved into place whole.

Every data file offline-rl writes into an output folder is first written to
``<output>/.offline-rl/staging/<random>.tmp`` (the manifest folder: Ray Data, pyarrow, RLlib's
``JsonReader`` and offline-rl's own listing never read it, and ``output_folder`` never counts it as
a user's file) and moved to its final name only once complete. A process that crashes or is
killed mid-file therefore leaves no file under a data name that reads as whole but holds part of
the data; what it leaves in staging is never read. A final name that already exists is never
replaced: committing onto it raises ``OutputError``.

Examples:
    >>> import os, tempfile, pyarrow.fs as pafs
    >>> folder = tempfile.mkdtemp()
    >>> with StagedFile(pafs.LocalFileSystem(), folder, f"{folder}/a.json") as staged:
    ...     staged.write(b'{"type": "SampleBatch"}\\n')
    ...     os.listdir(folder)
    ['.offline-rl']
    >>> sorted(os.listdir(folder))
    ['.offline-rl', 'a.json']
"""

from __future__ import annotations

import uuid
from typing import BinaryIO

import pyarrow.fs as pafs

from offline_rl.errors import OutputError
from offline_rl.recording.manifests import MANIFEST_FOLDER

#: Where staged files live, relative to the output folder.
STAGING_FOLDER = f"{MANIFEST_FOLDER}/staging"


class StagedFile:
    """An open file in ``output``'s staging folder that ``commit()`` moves to ``path`` (inside
    ``output``, on ``filesystem``) and ``discard()`` deletes. Used as a context manager, it
    commits when the block ends normally and discards when it raises."""

    def __init__(self, filesystem: pafs.FileSystem, output: str, path: str):
        self.filesystem = filesystem
        self.path = path
        staging = f"{output.rstrip('/')}/{STAGING_FOLDER}"
        filesystem.create_dir(staging, recursive=True)
        self.temporary = f"{staging}/{uuid.uuid4().hex}.tmp"
        self.stream: BinaryIO = filesystem.open_output_stream(self.temporary)
        self.bytes_written = 0

    def write(self, data: bytes) -> None:
        """Appends ``data`` to the staged file."""
        self.stream.write(data)
        self.bytes_written += len(data)

    def commit(self) -> str:
        """Closes the staged file and moves it to its final path (creating its folder); returns
        that path."""
        self.stream.close()
        self.filesystem.create_dir(self.path.rsplit("/", 1)[0], recursive=True)
        if self.filesystem.get_file_info(self.path).type != pafs.FileType.NotFound:
            self.filesystem.delete_file(self.temporary)
            raise OutputError(f"{self.path} already exists; offline-rl never replaces a file, so "
                              "this one was not written (is another writer using the same run "
                              "id?)")
        self.filesystem.move(self.temporary, self.path)
        return self.path

    def discard(self) -> None:
        """Closes and deletes the staged file."""
        self.stream.close()
        self.filesystem.delete_file(self.temporary)

    def __enter__(self) -> StagedFile:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        if error_type is None:
            self.commit()
        else:
            self.discard()
