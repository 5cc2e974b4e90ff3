"""Telegram end to end: a store that cannot write (a full disk, a database locked by another
process) holds messages unconfirmed, and every one of them is answered exactly once when it
can write again. None is skipped, none is confirmed to Telegram before it is stored."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections import Counter
from pathlib import Path

from tests.e2e.telegram_support import OTHER_USER, USER, assert_no_token, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import SHORT_BUSY_TIMEOUT, AgentJournal, Daemon
from tests.storage_faults import fill, small_filesystem

TAG = re.compile(r"\bmsg-(\d{3})\b")
HELD = r"cannot store Telegram updates \(.*\): they are held unconfirmed"


def answered(fake: FakeTelegram) -> Counter[str]:
    """How often each tagged message was answered (a coalesced answer answers several)."""
    return Counter(tag for text in fake.texts() for tag in TAG.findall(text))


def seen_by_agent(tmp_path: Path) -> Counter[str]:
    return Counter(tag for m in AgentJournal(tmp_path / "agent").messages()
                   for tag in TAG.findall(m["content"]))


def send(fake: FakeTelegram, numbers: range) -> list[int]:
    """Tagged messages from two users, alternating; returns their update ids."""
    ids = []
    for n in numbers:
        user = USER if n % 2 else OTHER_USER
        ids.append(fake.user_message(user, user, f"msg-{n:03d}")["update_id"])
    return ids




async def test_a_full_disk_holds_messages_until_space_returns(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "state", "16m") as state:
        filler = state / "filler"
        async with FakeTelegram() as fake:
            async with Daemon(telegram_config(tmp_path, fake)) as daemon:
                await started(daemon, fake)
                send(fake, range(0, 6))
                # The disk fills while those are on their way.
                assert await asyncio.to_thread(fill, filler) > 0
                held = send(fake, range(6, 20))
                await daemon.wait_for_log(HELD, timeout=30)
                # Polling goes on (about twice a second) for longer than the five one-second
                # attempts after which an update used to be skipped, and what came after the
                # disk filled stays unconfirmed: every poll asks from it again.
                polls = len(fake.calls_to("getUpdates"))
                await fake.wait_for_call("getUpdates", count=polls + 14, timeout=30)
                assert fake.confirmed_offset <= held[0]
                assert not any(f"{n:03d}" in answered(fake) for n in range(6, 20))
                filler.unlink()  # space comes back
                await fake.wait_for(lambda: len(answered(fake)) == 20, timeout=60,
                                    what="every message answered once space is back")
                await fake.wait_until_confirmed(held[-1], timeout=20)
            assert_no_token(daemon, fake.token)
    assert answered(fake) == Counter(f"{n:03d}" for n in range(20))
    assert seen_by_agent(tmp_path) == Counter(f"{n:03d}" for n in range(20))
    assert "skipping update" not in daemon.log
    assert "database or disk is full" in daemon.log
    # One line for the outage on Telegram's side, however long it lasted.
    assert len(re.findall(HELD, daemon.log)) == 1


async def test_a_locked_database_holds_messages_until_it_is_released(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections=SHORT_BUSY_TIMEOUT)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            send(fake, range(0, 2))
            await fake.wait_for(lambda: len(answered(fake)) == 2, timeout=20)
            # Another process takes the database's write lock and keeps it for longer than
            # the daemon's busy timeout (store.busy_timeout).
            other = sqlite3.connect(tmp_path / "state" / "picobridge.db", timeout=10,
                                    isolation_level=None, check_same_thread=False)
            try:
                await asyncio.to_thread(other.execute, "BEGIN IMMEDIATE")
                held = send(fake, range(2, 8))
                await daemon.wait_for_log(HELD, timeout=30)
                polls = len(fake.calls_to("getUpdates"))
                await fake.wait_for_call("getUpdates", count=polls + 3, timeout=20)
                assert fake.confirmed_offset <= held[0]
                assert not any(f"{n:03d}" in answered(fake) for n in range(2, 8))
            finally:
                await asyncio.to_thread(other.rollback)
                other.close()
            await fake.wait_for(lambda: len(answered(fake)) == 8, timeout=60,
                                what="every message answered once the lock is gone")
            await fake.wait_until_confirmed(held[-1], timeout=20)
        assert_no_token(daemon, fake.token)
    assert answered(fake) == Counter(f"{n:03d}" for n in range(8))
    assert seen_by_agent(tmp_path) == Counter(f"{n:03d}" for n in range(8))
    assert "database is locked" in daemon.log
    assert "skipping update" not in daemon.log
