"""What opening the database checks, without aiosqlite, and the command line's reads with
sqlite3 alone: a listing (`access list`) needs one query, not the daemon's store (aiosqlite
and its thread, every table group, the message types), which costs more than the read.

A read opens the database as `Store.open(path, migrate_schema=False)` does and refuses it in
the same words: a path that cannot be a database, a database that can never take a write, one
not at this picobridge's schema."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from picobridge.private import open_private, private_dir
from picobridge.store.schema import APPLIED_VERSIONS, VERSIONS_TABLE, require_current

if TYPE_CHECKING:
    from picobridge.store.records import ChatInfo

ACCESS_GRANTS = ("SELECT platform, user_id, allowed, changed_at FROM access_grants"
                 " ORDER BY platform, user_id")
# Every chat (of one platform, or of all with NULL twice), the latest first, with how many of
# its messages still wait.
CHATS = ("SELECT c.platform, c.chat_id, c.thread_id, c.session_id, c.created_at, c.updated_at,"
         " (SELECT COUNT(*) FROM inbound i WHERE i.chat_key = c.chat_key"
         "  AND i.status IN ('received', 'dispatched')), c.agent"
         " FROM chats c WHERE (? IS NULL OR c.platform = ?) ORDER BY c.updated_at DESC")


class StoreError(Exception):
    """The database could not be opened or used."""


def prepare(path: Path) -> None:
    """Once, at start: a clear word instead of SQLite's for a path that cannot be a database."""
    if path.is_dir():
        raise StoreError(f"cannot open database {path}: it is a directory")
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise StoreError(f"cannot create {path.parent}: {exc.strerror or exc}") from None
    try:
        # Created here, not by SQLite (0644): its -wal and -shm files take this file's mode.
        os.close(open_private(path, os.O_RDWR))
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from None


def refused_write(path: Path, exc: sqlite3.OperationalError) -> StoreError | None:
    """The refusal of a database that can never take a write (read-only file or folder), with
    the same words as `picobridge check`; None for a transient refusal (a lock)."""
    if "readonly" in str(exc) or "read-only" in str(exc):
        return StoreError(f"{path} is not writable")
    return None


def busy_timeout_pragma(seconds: float) -> str:
    return f"PRAGMA busy_timeout={max(1, round(seconds * 1000))}"


def grant_rows(rows: Sequence[Sequence[Any]]) -> list[tuple[str, str, bool, float]]:
    return [(r[0], r[1], bool(r[2]), r[3]) for r in rows]


def chat_rows(rows: Sequence[Sequence[Any]]) -> list[ChatInfo]:
    # The records (and the contract's message types) only once there are rows to make.
    if not rows:
        return []
    from picobridge.contract import ChatRef
    from picobridge.store.records import ChatInfo

    return [ChatInfo(ChatRef(r[0], r[1], r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows]


def access_grants(path: Path, busy_timeout: float) -> list[tuple[str, str, bool, float]]:
    """Every access grant and denial, as `Store.access_grants` gives them."""
    with _reading(path, busy_timeout) as db:
        return grant_rows(db.execute(ACCESS_GRANTS).fetchall())


def chats(path: Path, busy_timeout: float, platform: str | None = None) -> list[ChatInfo]:
    """Every chat, as `Store.chats` gives them."""
    with _reading(path, busy_timeout) as db:
        return chat_rows(db.execute(CHATS, (platform, platform)).fetchall())


@contextmanager
def _reading(path: Path, busy_timeout: float) -> Iterator[sqlite3.Connection]:
    prepare(path)
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from None
    try:
        db.execute(busy_timeout_pragma(busy_timeout))
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            refused = refused_write(path, exc)
            if refused is not None:
                raise refused from None
        db.execute(VERSIONS_TABLE)
        require_current({int(row[0]) for row in db.execute(APPLIED_VERSIONS)})
    except sqlite3.Error as exc:
        db.close()
        raise StoreError(f"cannot use database {path}: {exc}") from None
    except BaseException:
        db.close()
        raise
    # Only opening is judged here, as Store.open judges it: a query that fails on a database
    # that opened (a table dropped behind our back) is unforeseen, and stays the last-resort
    # handler's one line and exit 70, as it was through the store.
    try:
        yield db
    finally:
        db.close()
