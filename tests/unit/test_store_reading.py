"""The command line's reads with sqlite3 alone (store/reading.py) give what the store gives and
refuse a database as `Store.open(..., migrate_schema=False)` does, in the same words."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from picobridge.contract import ChatRef, InboundMessage
from picobridge.store import Store, StoreError, reading
from picobridge.store.schema import SchemaError, available_migrations


async def test_the_grants_are_the_stores(tmp_path: Path) -> None:
    path = tmp_path / "picobridge.db"
    store = await Store.open(path)
    try:
        await store.set_access("telegram", "2", True)
        await store.set_access("slack", "U1", False)
        await store.set_access("telegram", "1", True)
        expected = await store.access_grants()
    finally:
        await store.close()
    assert [g[:3] for g in expected] == [("slack", "U1", False), ("telegram", "1", True),
                                         ("telegram", "2", True)]
    assert reading.access_grants(path, 5.0) == expected


async def test_the_chats_are_the_stores(tmp_path: Path) -> None:
    path = tmp_path / "picobridge.db"
    store = await Store.open(path)
    chats = [ChatRef("telegram", "1"), ChatRef("slack", "D1"), ChatRef("telegram", "-5", "9")]
    try:
        for n, chat in enumerate(chats):
            for k in range(n + 1):  # a different number of messages waiting in each chat
                await store.record_inbound(InboundMessage(
                    chat=chat, sender_id="42", text="hi", platform_message_id=f"{n}.{k}"))
        expected = {platform: await store.chats(platform)
                    for platform in (None, "telegram", "slack", "matrix")}
    finally:
        await store.close()
    assert sorted(info.open_messages for info in expected[None]) == [1, 2, 3]
    assert len(expected["telegram"]) == 2 and expected["matrix"] == []
    for platform, infos in expected.items():
        assert reading.chats(path, 5.0, platform) == infos, platform


async def test_a_database_behind_the_schema_is_refused_in_the_stores_words(
        tmp_path: Path) -> None:
    path = tmp_path / "picobridge.db"
    await (await Store.open(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM schema_migrations WHERE version = ?",
                   (available_migrations()[-1].version,))
    with pytest.raises(SchemaError) as by_store:
        await Store.open(path, migrate_schema=False)
    with pytest.raises(SchemaError) as by_reading:
        reading.access_grants(path, 5.0)
    assert str(by_reading.value) == str(by_store.value)
    assert "run `picobridge migrate`" in str(by_reading.value)


async def test_a_database_that_takes_no_write_is_refused(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ro.db"
    await (await Store.open(path)).close()
    connect = sqlite3.connect

    def read_only(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db: sqlite3.Connection = connect(*args, **kwargs)
        db.execute("PRAGMA query_only = ON")
        return db

    monkeypatch.setattr(sqlite3, "connect", read_only)
    with pytest.raises(StoreError, match=r"ro\.db is not writable"):
        reading.access_grants(path, 5.0)


def test_a_directory_is_no_database(tmp_path: Path) -> None:
    (tmp_path / "picobridge.db").mkdir()
    with pytest.raises(StoreError, match="it is a directory"):
        reading.access_grants(tmp_path / "picobridge.db", 5.0)
