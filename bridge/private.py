"""Files and folders of the state only their owner may read or change (messages are private),
made so whatever the umask: a folder 0700, a file 0600.

The mode passed to mkdir or open only takes bits away from what the umask leaves, and a
umask of 0 (or 002, common on desktops) would leave the state readable by every local user;
so the mode is set again once the file or folder exists.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """`path` as a folder, created with its missing parents; a folder created here is 0700
    (an existing one is left as the operator made it)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if path in missing:
        os.chmod(path, DIR_MODE)
    return path


def open_private(path: Path, flags: int) -> int:
    """os.open with O_CREAT: a file created here is 0600 (an existing one keeps its mode)."""
    while True:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
        except FileExistsError:
            try:
                return os.open(path, (flags & ~os.O_CREAT) | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # removed between the two: create it after all
        os.fchmod(fd, FILE_MODE)
        return fd
