"""One instance per state directory.

Two daemons on one database would both run the backlog and send every reply twice. `run`,
`chat` and `migrate` hold an exclusive lock on `<state_dir>/picobridge.lock` for as long as
they run; the kernel drops it when the process dies, however it dies, so a lock is never
stale. Commands that only read, or that make a single write SQLite serialises safely beside a
running daemon (`access allow`, `sessions reset`), take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from picobridge.private import open_private

LOCK_NAME = "picobridge.lock"


class InstanceLocked(Exception):
    """Another picobridge holds the state directory."""


class InstanceLock:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, what: str) -> None:
        """Take the lock or raise InstanceLocked naming the holder."""
        fd = open_private(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise InstanceLocked(
                f"another picobridge{holder} is using {self.path.parent}; "
                f"stop it before `picobridge {what}` (one instance per state_dir)") from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def holder(state_dir: Path) -> int | None:
    """The pid of the picobridge holding `state_dir` (0 when it did not say), None when none
    does. Creates nothing."""
    try:
        fd = os.open(state_dir / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        with contextlib.suppress(OSError, ValueError):
            return int(os.pread(fd, 32, 0).decode().strip())
        return 0
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""
