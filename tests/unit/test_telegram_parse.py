"""Reading one update at a time (adapters/telegram/parse.py) and holding updates through a
storage outage (adapters/telegram/storage.py): what is refused, and what the log says."""

from __future__ import annotations

import errno
import logging
from typing import Any

import pytest
from telegram import Bot

from picobridge.adapters.telegram.parse import (
    Malformed,
    describe_failure,
    parse_update,
    update_id_of,
)
from picobridge.adapters.telegram.storage import StorageWait, disk_outage
from picobridge.contract import StorageUnavailable

PRIVATE = "the user's secret words"
BOT = Bot("123:abc")


def message(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"message_id": 7, "date": 1, "text": PRIVATE,
                            "chat": {"id": 42, "type": "private"},
                            "from": {"id": 42, "is_bot": False, "first_name": "A"}}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize("raw", [
    [], 42, PRIVATE, None,
    {"message": message()},  # no update_id
    {"update_id": True, "message": message()},
    {"update_id": 1, "message": {}},
    {"update_id": 1, "message": PRIVATE},
    {"update_id": 1, "edited_message": [PRIVATE]},
    {"update_id": 1, "message": message(chat=None)},
    {"update_id": 1, "message": message(chat={"id": "42", "type": "private"})},
    {"update_id": 1, "message": message(chat={"type": "private"})},
    {"update_id": 1, "message": message(text=7391)},
    {"update_id": 1, "message": message(caption=["x"])},
    {"update_id": 1, "message": message(media_group_id=5)},
    {"update_id": 1, "message": message(message_thread_id="3")},
    {"update_id": 1, "message": message(**{"from": {"id": "42", "is_bot": False,
                                                    "first_name": PRIVATE}})},
])
def test_unreadable_updates_are_refused_without_quoting_them(raw: object) -> None:
    with pytest.raises(Malformed) as caught:
        parse_update(raw, BOT)
    assert PRIVATE not in str(caught.value) and "7391" not in str(caught.value)


def test_a_good_update_and_an_unknown_kind_are_read() -> None:
    update = parse_update({"update_id": 9, "message": message()}, BOT)
    assert update.update_id == 9 and update.message is not None
    assert update.message.chat.id == 42 and update.message.text == PRIVATE
    # A kind the bridge does not handle is not malformed: it is confirmed as usual.
    assert parse_update({"update_id": 10, "poll_answer_kind_from_the_future": {}}, BOT)
    assert update_id_of({"update_id": 11}) == 11
    assert update_id_of({"update_id": "11"}) is None and update_id_of([11]) is None


def test_a_failure_is_described_by_class_and_place_only() -> None:
    try:
        int(PRIVATE)
    except ValueError as exc:
        text = describe_failure(exc)
    assert text.startswith("ValueError at test_telegram_parse.py:")
    assert PRIVATE not in text


async def test_storage_outage_is_held_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    wait = StorageWait(hold=True, first=0.01, cap=0.02)
    attempts = 0

    async def store() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 6:
            raise StorageUnavailable("database or disk is full")
        return "stored"

    with caplog.at_level(logging.DEBUG, logger="picobridge.telegram"):
        assert await wait.run("receiving a message", store) == "stored"
        assert not wait.down
    assert attempts == 6
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "database or disk is full" in warnings[0].getMessage()


async def test_storage_outage_passes_through_when_not_held() -> None:
    wait = StorageWait(hold=False)

    async def store() -> None:
        raise StorageUnavailable("database is locked")

    with pytest.raises(StorageUnavailable):
        await wait.run("receiving a message", store)
    assert wait.down

    async def read() -> bool:
        return True

    # A read that works does not end the outage (reads work on a full disk); a write does.
    assert await wait.run("checking a sender", read, writes=False)
    assert wait.down
    assert await wait.run("receiving a message", read)
    assert not wait.down


def test_disk_outages_are_told_from_other_file_errors() -> None:
    assert disk_outage(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_outage(OSError(errno.EROFS, "Read-only file system"))
    assert not disk_outage(OSError(errno.EACCES, "Permission denied"))
