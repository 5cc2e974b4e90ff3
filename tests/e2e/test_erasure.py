"""`picobridge export USER PATH` and `picobridge forget USER` beside a running daemon: what
the bridge holds about one user is written out, then gone from the database and the disk,
while another user's chat stays whole."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.telegram_support import OTHER_USER, USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, run_cli

PDF = b"%PDF-1.4\n" + bytes(range(256)) * 8


def _rows(db_path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db_path) as db:
        return db.execute(sql, params).fetchall()


async def test_export_then_forget_a_user(tmp_path: Path) -> None:
    db = tmp_path / "state" / "picobridge.db"
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            code, out, err = await run_cli("access", "allow", f"telegram:{USER}",
                                           "--config", str(config))
            assert code == 0, err
            fake.user_message(USER, USER, "my secret plans")
            await reply_containing(fake, USER, "echo: my secret plans")
            fake.user_document(USER, USER, PDF, "plans.pdf", "application/pdf",
                               caption="the file")
            await reply_containing(fake, USER, "the file")
            fake.user_message(OTHER_USER, OTHER_USER, "someone else")
            await reply_containing(fake, OTHER_USER, "echo: someone else")
            (saved,) = [Path(str(r[0])) for r in _rows(
                db, "SELECT json_extract(attachments, '$[0].path') FROM inbound"
                " WHERE text = 'the file'")]
            assert saved.read_bytes() == PDF
            (session,) = [str(r[0]) for r in _rows(
                db, "SELECT session_id FROM sessions WHERE chat_key = ?", f"telegram:{USER}")]
            # As the prime-rpc driver keeps a session's file (agent.sessions_dir's default).
            kept = tmp_path / "state" / "agent-sessions" / f"{session}.jsonl"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text('{"type":"session"}\n')

            target = tmp_path / "export"
            code, out, err = await run_cli("export", f"telegram:{USER}", str(target),
                                           "--config", str(config))
            assert code == 0, out + err
            data = json.loads((target / "export.json").read_text())
            assert data["user"] == f"telegram:{USER}"
            assert [m["text"] for m in data["messages"]] == ["my secret plans", "the file"]
            assert any("echo: my secret plans" in r["text"] for r in data["replies"])
            assert [c["chat_key"] for c in data["chats"]] == [f"telegram:{USER}"]
            assert (target / "media" / saved.name).read_bytes() == PDF
            assert "someone else" not in (target / "export.json").read_text()

            # As a chat on another agent's menu has it (core/menus.py): its key names the user.
            with sqlite3.connect(db) as conn:
                conn.execute("INSERT INTO chat_menus VALUES (?, 'a1b2', 0)", (f"telegram:{USER}",))
            code, out, err = await run_cli("forget", f"telegram:{USER}",
                                           "--config", str(config))
            assert code == 0, out + err
            assert "2 message(s)" in out and "1 chat(s) with 1 session(s), 2 file(s)" in out
            assert "access grant" in out and "the agent itself remembers" in out
            # The daemon keeps serving the others.
            fake.user_message(OTHER_USER, OTHER_USER, "still here")
            await reply_containing(fake, OTHER_USER, "echo: still here")
    key = f"telegram:{USER}"
    assert _rows(db, "SELECT count(*) FROM inbound WHERE sender_id = ?", str(USER)) == [(0,)]
    assert _rows(db, "SELECT count(*) FROM outbox WHERE chat_key = ?", key) == [(0,)]
    assert _rows(db, "SELECT count(*) FROM chats WHERE chat_key = ?", key) == [(0,)]
    assert _rows(db, "SELECT count(*) FROM sessions WHERE chat_key = ?", key) == [(0,)]
    assert _rows(db, "SELECT count(*) FROM chat_menus WHERE chat_key = ?", key) == [(0,)]
    assert _rows(db, "SELECT count(*) FROM access_grants WHERE user_id = ?", str(USER)) == [(0,)]
    assert not saved.exists() and not kept.exists()
    assert _rows(db, "SELECT count(*) FROM inbound WHERE sender_id = ?", str(OTHER_USER)) == [
        (2,)]
