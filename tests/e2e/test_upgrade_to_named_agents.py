"""An installation from before named agents, upgraded in place: the old single-agent,
single-bot config unchanged and a database the old picobridge left (migrations 0001-0003
only, with a chat, its current and an ended session, the session's worker and the Telegram
offset). `picobridge run` migrates it on start; every session, affinity and offset is kept:
the chat goes on in the same session on the same worker, and Telegram is asked from the
saved offset (an update answered before the upgrade is not answered again)."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from importlib import resources
from pathlib import Path

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, run_cli

SESSION = f"telegram.{USER}.20250101T000000"
OLD_SESSION = f"telegram.{USER}.20240101T000000"
READY = re.compile(r"agent ready pid=(\d+) worker=(\S+)")


def old_database(path: Path, offset: int) -> None:
    """What the single-agent picobridge left: its three migrations and its rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shipped = resources.files("picobridge.migrations")
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                   " name TEXT NOT NULL, applied_at REAL NOT NULL)")
        for version, name in ((1, "init"), (2, "outbox_settles"), (3, "session_workers")):
            sql = (shipped / f"{version:04d}_{name}.sql").read_text(encoding="utf-8")
            db.executescript(sql)
            db.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
        now = time.time()
        db.execute("INSERT INTO chats(chat_key, platform, chat_id, session_id, created_at,"
                   " updated_at) VALUES (?, 'telegram', ?, ?, 0, 0)",
                   (f"telegram:{USER}", str(USER), SESSION))
        db.executemany("INSERT INTO sessions(session_id, chat_key, created_at, ended_at)"
                       " VALUES (?, ?, ?, ?)", [(OLD_SESSION, f"telegram:{USER}", 0, 1),
                                                (SESSION, f"telegram:{USER}", 1, None)])
        db.execute("INSERT INTO session_workers VALUES (?, 'w2', 1)", (SESSION,))
        db.execute("INSERT INTO cursors VALUES ('telegram.offset', ?, ?)",
                   (json.dumps({"offset": offset, "saved": int(now)}), now))


async def test_an_old_config_and_database_are_upgraded_in_place(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        answered = fake.user_message(USER, USER, "answered before the upgrade")
        old_database(tmp_path / "state" / "picobridge.db", answered["update_id"] + 1)
        config = telegram_config(tmp_path, fake, agent={"pool_size": 2})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "after the upgrade")
            await reply_containing(fake, USER, "echo: after the upgrade")
            ready = {name: int(pid) for pid, name in READY.findall(daemon.log)}
        assert daemon.returncode == 0
        first_poll = next(c for c in fake.calls if c.method == "getUpdates")
        assert first_poll.params.get("offset") == answered["update_id"] + 1
        assert not any("answered before" in (m.text or "") for m in fake.sent_messages(USER))
        [message] = [e for e in AgentJournal(tmp_path / "agent").entries()
                     if isinstance(e.get("record"), dict)
                     and e["record"].get("type") == "message"]
        assert message["record"]["session"] == SESSION  # the same conversation goes on
        assert message["pid"] == ready["w2"]  # on the worker that held it
        code, out, _ = await run_cli("sessions", "show", f"telegram:{USER}", "--config",
                                     str(config))
        assert code == 0
        assert f"{SESSION} (current)\tagent default" in out
        assert f"{OLD_SESSION}\tagent default" in out
