"""Storage faults for end-to-end tests: a small filesystem to fill, and another process's write
lock on the daemon's database."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from tests.harness import needs_root


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path` (the tests run as root), unmounted afterwards."""
    needs_root(f"it mounts a {size} tmpfs to fill")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)
    try:
        yield path
    finally:
        # Lazily: a daemon killed a moment ago may still hold its files open.
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(path: Path) -> int:
    """Write `path` until the filesystem is full, to the last byte; returns its size."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            while True:
                try:
                    written += os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)
    return written


@contextlib.asynccontextmanager
async def write_lock(db: Path) -> AsyncIterator[None]:
    """Another process's write transaction on the daemon's database, as a backup tool or a
    second program would hold it."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None, check_same_thread=False)
    try:
        # Waits (briefly) for a write of the daemon's that is under way.
        await asyncio.to_thread(conn.execute, "BEGIN IMMEDIATE")
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()
