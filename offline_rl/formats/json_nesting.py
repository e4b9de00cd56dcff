"""How deep JSON nests, measured before any parser sees it.

Arrow's JSON reader (``ray.data.read_json``) parses recursively: a line nested 100,000 deep
(290 KB) overflows its stack and kills the reading process (a segmentation fault, which Ray
retries). Python's ``json`` raises ``RecursionError`` at about 1,000. Legacy SampleBatch data
nests a few levels (a column of image observations: 5), so anything deeper than
``MAX_JSON_DEPTH`` is refused, naming the file and line, before it is parsed.

The depth is counted with numpy over the raw bytes: ``[`` and ``{`` outside strings open a
level, ``]`` and ``}`` close one; escaped quotes are removed first, and string state starts
afresh on each line (a JSON string cannot hold a raw newline).
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

from offline_rl.errors import DataFormatError

#: The deepest nesting read from JSON data.
MAX_JSON_DEPTH = 100
#: Bytes scanned at a time.
CHUNK_BYTES = 4 << 20

_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1
_MARKS = _OPEN != 0
_MARKS[[ord('"'), ord("\n")]] = True


class _Scanner:
    """The running depth over consecutive chunks of one JSON text."""

    def __init__(self, max_depth: int):
        self.max_depth = max_depth
        self.depth = 0
        self.in_string = False
        self.lines = 0

    def feed(self, chunk: bytes) -> int | None:
        """Scans ``chunk`` (cut after a newline, or not inside a run of backslashes); the
        1-based line where the depth first exceeds ``max_depth``, else ``None``."""
        text = chunk.replace(b"\\\\", b"").replace(b'\\"', b"")
        everything = np.frombuffer(text, np.uint8)
        where = np.flatnonzero(_MARKS[everything])  # quotes, brackets, newlines only
        data = everything[where]
        if not data.size:
            return None
        positions = np.arange(data.size)
        newline = data == ord("\n")
        line_start = np.maximum.accumulate(np.where(newline, positions, -1))
        quotes = np.cumsum(data == ord('"'), dtype=np.int64) + self.in_string
        quotes_before = np.where(line_start >= 0, quotes[np.maximum(line_start, 0)], 0)
        outside = (quotes - quotes_before) % 2 == 0
        depth = self.depth + np.cumsum(_OPEN[data] * outside, dtype=np.int64)
        over = np.flatnonzero(depth > self.max_depth)
        if over.size:
            return self.lines + text.count(b"\n", 0, int(where[over[0]])) + 1
        self.depth = int(depth[-1])
        self.in_string = bool((quotes[-1] - quotes_before[-1]) % 2)
        self.lines += int(newline.sum())
        return None


def deeper_than(text: bytes, max_depth: int = MAX_JSON_DEPTH) -> int | None:
    """The 1-based line of ``text`` where JSON nesting first exceeds ``max_depth``, else
    ``None``.

    Examples:
        >>> deeper_than(b'{"obs": [[1, 2]], "s": "[[[["}', max_depth=3)
        >>> deeper_than(b'{"ok": 1}\\n' + b"[" * 5 + b"]" * 5, max_depth=3)
        2
    """
    return _Scanner(max_depth).feed(text)


def check_json_nesting(stream: BinaryIO, shown: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Reads ``stream`` (a JSON or JSON-lines file, named ``shown`` in messages) in chunks and
    raises ``DataFormatError`` naming its line when the nesting exceeds ``max_depth``."""
    scanner, pending = _Scanner(max_depth), b""
    while True:
        block = stream.read(CHUNK_BYTES)
        data = pending + block
        if not block:
            cut = len(data)
        else:
            cut = data.rfind(b"\n") + 1 or len(data.rstrip(b"\\"))
        line = scanner.feed(data[:cut])
        if line is not None:
            raise DataFormatError(
                f"{shown}, line {line}: JSON nested deeper than {max_depth} levels, which "
                "no SampleBatch holds (a parser would exhaust its stack on it); the file is "
                "damaged or not data: re-write it, or move it out of the input")
        pending = data[cut:]
        if not block:
            return
