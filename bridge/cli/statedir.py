"""The state directory as the command line meets it: who may use it, and what to say when the
one running picobridge cannot.

Root working in a state_dir that belongs to the service's user would leave files that user
cannot write (a database, its journal, the access marker, the agent's workspace), so it is
told to run the command as that user instead. Every permission problem names the path and
the fix.
"""

from __future__ import annotations

import os
import pwd
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from picobridge import exit_codes
from picobridge.cli.errors import CliError
from picobridge.private import private_dir


class StateDirError(CliError):
    """The state directory cannot be used by this user; one line naming path and fix."""

    code = exit_codes.DATABASE


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        try:
            candidate.stat()
            return candidate
        except OSError:
            continue
    return Path("/")


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def read_only(path: Path) -> bool:
    """Whether `path` (or the nearest folder above it that exists) is on a read-only mount."""
    try:
        return bool(os.statvfs(_nearest_existing(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


READ_ONLY = ("it is on a read-only filesystem: mount it read-write (a container volume "
             "without :ro; under systemd, StateDirectory= or ReadWritePaths=)")


def fix(path: Path, argv: Sequence[str]) -> str:
    """How to get past a permission problem at `path` (the state_dir or something in it)."""
    again = shlex.join(["picobridge", *argv])
    me = _user(os.geteuid())
    elsewhere = ("or set state_dir (in the config, or PICOBRIDGE_STATE_DIR=...) to a folder "
                 f"{me} can write")
    existing = _nearest_existing(path)
    owner = _owner(existing)
    if read_only(existing):
        return f"{READ_ONLY}, {elsewhere}"
    if existing != path and not os.access(existing, os.X_OK):
        return f"{existing} does not let {me} in; give {me} access to it, {elsewhere}"
    if existing == path and owner is not None and owner not in (0, os.geteuid()):
        return f"it belongs to {_user(owner)}: run `sudo -u {_user(owner)} {again}`, {elsewhere}"
    if existing == path and owner == os.geteuid():
        return f"give yourself access (`chmod u+rwx {path}`), {elsewhere}"
    if existing == path:
        # Root's folder, perhaps with root's files in it: all of it becomes this user's.
        return f"make it {me}'s (`sudo chown -R {me}: {path}`), {elsewhere}"
    return f"make it {me}'s (`sudo install -d -o {me} {path}`), {elsewhere}"


def problem(path: Path, exc: OSError, argv: Sequence[str]) -> StateDirError:
    reason = exc.strerror or str(exc)
    return StateDirError(f"cannot use state_dir {path}: {reason}; {fix(path, argv)}")


def refuse_foreign(state_dir: Path, argv: Sequence[str]) -> None:
    """As root, refuse a state_dir owned by another user: what root creates there (database
    journal, access marker, agent workspace) would lock that user out of their own files."""
    if os.geteuid() != 0:
        return
    owner = _owner(state_dir)
    if owner is None or owner == 0:
        return
    name = _user(owner)
    raise StateDirError(
        f"state_dir {state_dir} belongs to {name}; files root makes there would lock {name} "
        f"out: run `sudo -u {name} {shlex.join(['picobridge', *argv])}`")


def foreign_files(state_dir: Path) -> list[tuple[str, int]]:
    """(name, owner) of what in `state_dir` belongs to another user and this one cannot write:
    what a command run as root left in the service's folder (a database, its journal, the
    lock). The access marker is left out: it is replaced, never written in place."""
    if os.geteuid() == 0:
        return []
    found = []
    try:
        entries = sorted(os.scandir(state_dir), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if ".access-changed" in entry.name:
            continue
        try:
            owner = entry.stat(follow_symlinks=False).st_uid
        except OSError:
            continue
        need = os.W_OK | (os.X_OK if entry.is_dir(follow_symlinks=False) else 0)
        if owner != os.geteuid() and not os.access(entry.path, need):
            found.append((entry.name, owner))
    return found


def refuse_foreign_files(state_dir: Path, argv: Sequence[str]) -> None:
    """Name the one command that gives `state_dir` back to this user, when another user's
    files in it would make picobridge fail on them. In a state_dir of another user, the fix
    is to be that user instead: giving their files away would lock them out."""
    found = foreign_files(state_dir)
    if not found:
        return
    me = _user(os.geteuid())
    names = ", ".join(name for name, _ in found[:4]) + (", ..." if len(found) > 4 else "")
    folder_owner = _owner(state_dir)
    if folder_owner is not None and folder_owner != os.geteuid():
        name = _user(folder_owner)
        raise StateDirError(
            f"state_dir {state_dir} belongs to {name} and {me} cannot write its files "
            f"({names}): run `sudo -u {name} {shlex.join(['picobridge', *argv])}`")
    owners = sorted({_user(owner) for _, owner in found})
    raise StateDirError(
        f"state_dir {state_dir} holds files of {' and '.join(owners)} that {me} cannot write "
        f"({names}), left by picobridge run as {owners[0]} perhaps; give them to {me} once, "
        f"as root: `chown -R {me}: {state_dir}`")


def prepare(state_dir: Path, argv: Sequence[str], *, create: bool, announce: bool = False) -> bool:
    """Make sure this user can use `state_dir`: True when it exists (created if `create`,
    and said so on stderr if `announce`), False when it does not and was not to be made.
    Raises StateDirError with the fix."""
    refuse_foreign(state_dir, argv)
    try:
        if state_dir.exists() and not state_dir.is_dir():
            raise StateDirError(f"state_dir {state_dir} is a file, not a directory")
        if not state_dir.exists():
            if not create:
                return False
            private_dir(state_dir)
            if announce:
                print(f"picobridge: created state_dir {state_dir} (set state_dir to choose "
                      "another)", file=sys.stderr)
            return True
    except OSError as exc:
        raise problem(state_dir, exc, argv) from None
    need = os.R_OK | os.X_OK | (os.W_OK if create else 0)
    if not os.access(state_dir, need):
        raise problem(state_dir, PermissionError(13, "Permission denied"), argv)
    refuse_foreign_files(state_dir, argv)
    return True
