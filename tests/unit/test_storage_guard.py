"""core/storage.py: a database error on the intake path becomes StorageUnavailable, the
outage logged once when it begins and once when writes succeed again; anything else passes
through as it was."""

from __future__ import annotations

import asyncio
import logging
import sqlite3

import pytest

from picobridge.contract import StorageUnavailable
from picobridge.core.storage import StorageGuard
from picobridge.store import StoreError


async def refused(exc: BaseException) -> None:
    await asyncio.sleep(0)  # the guard is around an awaited store call
    raise exc


async def test_an_outage_is_said_once_when_it_begins_and_once_when_it_ends(
        caplog: pytest.LogCaptureFixture) -> None:
    guard = StorageGuard()
    caplog.set_level(logging.WARNING, "picobridge.intake")
    for exc in (sqlite3.OperationalError("database or disk is full"), OSError("I/O error"),
                StoreError("cannot use database")):
        with pytest.raises(StorageUnavailable) as raised, guard.writing("receiving a message"):
            await refused(exc)
        assert str(raised.value) == str(exc)
        assert raised.value.__cause__ is None and raised.value.__suppress_context__
        assert guard.down
    with guard.writing("receiving a message"):
        await asyncio.sleep(0)
    assert not guard.down
    with guard.writing("receiving a message"):
        pass
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "cannot store (database or disk is full) while receiving a message: messages are not"
        " acknowledged to their platforms until the database takes writes again",
        "the database takes writes again (after: cannot use database); intake resumes",
    ]


async def test_other_errors_and_cancellation_pass_through_and_end_no_outage() -> None:
    guard = StorageGuard()
    with pytest.raises(StorageUnavailable), guard.writing("saving a position"):
        await refused(sqlite3.OperationalError("database is locked"))
    with pytest.raises(ValueError, match="not a database matter"), \
            guard.writing("saving a position"):
        await refused(ValueError("not a database matter"))
    assert guard.down  # only a write that succeeds ends the outage
    task = asyncio.ensure_future(refused(asyncio.CancelledError()))
    with pytest.raises(asyncio.CancelledError), guard.writing("saving a position"):
        await task
    assert guard.down
