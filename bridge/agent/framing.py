"""NDJSON framing for the agent's pipes.

Lines end at b"\\n" only. Agents put U+2028/U+2029 and bare CRs inside JSON strings, and
`str.splitlines` or a text-mode reader would cut a record there; so this works on bytes.
An over-long line is skipped up to its end instead of growing the buffer without bound, and
a line that is not JSON is reported, never fatal.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

MAX_LINE_BYTES = 16 * 1024 * 1024
_CHUNK = 256 * 1024

log = logging.getLogger("picobridge.framing")


class ByteSource(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class OversizedLine(bytes):
    """Stands, in order, for a line that was too long: its value is the line's first bytes
    (enough for a protocol driver to tell whose answer was lost)."""


class LineSplitter:
    """Incremental splitter: feed chunks, get complete lines (without the terminator)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._max = max_line
        self._skipped: list[bytes] = []
        self._parts: list[bytes] = []
        self._size = 0
        self._discarding = False
        self.oversized = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(chunk[start:])
                return lines
            piece = chunk[start:end]
            start = end + 1
            if self._discarding:
                self._discarding = False
                lines.append(self._skipped.pop())
                continue
            if self._size + len(piece) > self._max:
                lines.append(self._drop_buffer(piece))
                continue
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts, self._size = [], 0
            lines.append(piece[:-1] if piece.endswith(b"\r") else piece)

    def _keep(self, rest: bytes) -> None:
        if not rest or self._discarding:
            return
        if self._size + len(rest) > self._max:
            # Reported when the line ends, so it keeps its place among the lines around it.
            self._skipped.append(self._drop_buffer(rest))
            self._discarding = True
            return
        self._parts.append(rest)
        self._size += len(rest)

    def _drop_buffer(self, tail: bytes) -> OversizedLine:
        self.oversized += 1
        log.warning("agent output line over %d bytes skipped", self._max)
        head = (self._parts[0] if self._parts else tail)[:256]
        self._parts, self._size = [], 0
        return OversizedLine(head)

    def leftover(self) -> bytes:
        """A final line with no terminator (the writer died mid-line)."""
        return b"" if self._discarding else b"".join(self._parts)


async def read_lines(source: ByteSource, max_line: int = MAX_LINE_BYTES) -> AsyncIterator[bytes]:
    splitter = LineSplitter(max_line)
    while True:
        chunk = await source.read(_CHUNK)
        if not chunk:
            break
        for line in splitter.feed(chunk):
            yield line
    tail = splitter.leftover()
    if tail.strip():
        yield tail


def decode_record(line: bytes) -> dict[str, Any] | None:
    """A JSON object from one line, or None (logged) for blank, junk or non-object lines.

    Invalid UTF-8 becomes U+FFFD rather than costing the whole record (an answer with one bad
    byte is still an answer). Nesting deep enough to exhaust the parser's recursion is junk.
    """
    if not line.strip():
        return None
    try:
        record = json.loads(line.decode("utf-8", "replace"))
    except ValueError:
        log.warning("agent printed a line that is not JSON, skipped: %r", line[:200])
        return None
    except RecursionError:
        log.warning("agent printed JSON nested too deeply, skipped (%d bytes)", len(line))
        return None
    if not isinstance(record, dict):
        log.warning("agent printed JSON that is not an object, skipped: %r", line[:200])
        return None
    return record


def encode_record(record: dict[str, Any]) -> bytes:
    # ensure_ascii: the line is then pure ASCII, so no agent-side line splitter of any kind
    # (Unicode-aware or not) can cut it anywhere but at our b"\n".
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
