"""[limits] through `picobridge run`: a third message in an hour with a limit of 2 is kept but
not sent to the agent, its sender hears when the limit resets (once), /status shows what is
left, and a restart forgets none of it."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from tests.e2e.telegram_support import (
    OTHER_USER,
    USER,
    replies,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon

LIMIT_TEXT = "You have reached the limit of 2 per hour"


async def test_a_third_message_in_an_hour_waits_for_the_limit_across_a_restart(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections={"limits": {
            "messages_per_hour": 2, "exempt_users": [f"telegram:{OTHER_USER}"]}})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            for text in ("one", "two"):
                fake.user_message(USER, USER, text)
                await reply_containing(fake, USER, f"echo: {text}")
            fake.user_message(USER, USER, "three")
            notice = await reply_containing(fake, USER, LIMIT_TEXT)
            assert re.search(r"resets at \d\d:\d\d UTC", notice.text or ""), notice.text
            fake.user_message(USER, USER, "/status")
            await reply_containing(fake, USER, "Messages left: 0 of 2 this hour")
            for n in range(3):  # exempt
                fake.user_message(OTHER_USER, OTHER_USER, f"free {n}")
                await reply_containing(fake, OTHER_USER, f"echo: free {n}")
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "four")
            await daemon.wait_for_log(r"over the limit \(2 per hour\)")
            fake.user_message(USER, USER, "/status")
            await reply_containing(fake, USER, "Messages left: 0 of 2 this hour")
        assert len(replies(fake, USER, LIMIT_TEXT)) == 1  # once per window
        assert replies(fake, USER, "echo: three") == replies(fake, USER, "echo: four") == []
    sent = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
    assert "three" not in sent and "four" not in sent and sent.count("one") == 1
    with sqlite3.connect(tmp_path / "state" / "picobridge.db") as db:
        kept = db.execute("SELECT text, status, error FROM inbound WHERE text IN"
                          " ('three', 'four') ORDER BY id").fetchall()
    assert kept == [("three", "dropped", "over the limit: 2 per hour"),
                    ("four", "dropped", "over the limit: 2 per hour")]
