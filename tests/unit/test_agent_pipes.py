"""The agent's pipes are read in 64 KiB pieces (asyncio's 256 KiB buffer is over glibc's
threshold for asking the OS for memory: one mmap and munmap per record), and a line longer
than a piece still arrives whole and in order."""

from __future__ import annotations

import sys
from pathlib import Path

from picobridge.agent.framing import decode_record, read_lines
from picobridge.agent.process import spawn

# A record far longer than one read, then a short one; something on stderr too.
WRITER = (
    "import json, sys\n"
    "sys.stdout.write(json.dumps({'type': 'response', 'content': 'x' * 300000}) + '\\n')\n"
    "sys.stdout.write(json.dumps({'type': 'pong'}) + '\\n')\n"
    "sys.stderr.write('e' * 100000 + '\\n')\n"
)


async def test_long_lines_arrive_whole_read_in_heap_sized_pieces(tmp_path: Path) -> None:
    process = await spawn([sys.executable, "-c", WRITER], cwd=tmp_path, env={})
    transport = process.proc._transport  # type: ignore[attr-defined]
    for fd in (1, 2):
        assert transport.get_pipe_transport(fd).max_size == 64 * 1024
    assert process.proc.stdout is not None and process.proc.stderr is not None
    records = [decode_record(line) async for line in read_lines(process.proc.stdout)]
    assert records == [{"type": "response", "content": "x" * 300000}, {"type": "pong"}]
    errors = [line async for line in read_lines(process.proc.stderr)]
    assert errors == [b"e" * 100000]
    assert await process.exited() == 0
    process.release()
