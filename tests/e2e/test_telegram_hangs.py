"""Telegram end to end: a file whose getFile or download hangs holds back only its own chat, for
at most attachments.download_timeout; then its sender is told which file could not be fetched
and the message goes on without it, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.telegram_support import (
    OTHER_USER,
    USER,
    assert_no_token,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.server import DOWNLOAD
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon

DOWNLOAD_TIMEOUT = 4


@pytest.mark.parametrize("hanging", ["getFile", DOWNLOAD])
async def test_a_hanging_file_delays_no_other_chat_and_its_sender_is_told(
        tmp_path: Path, hanging: str) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections={
            "attachments": {"download_timeout": DOWNLOAD_TIMEOUT}})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.stall_next(hanging)
            fake.user_document(USER, USER, b"%PDF-1.7 quarterly numbers", "report.pdf",
                               "application/pdf", caption="see the report")
            await fake.wait_for_call("getFile")
            # Another user's message goes through while the file hangs (the hang ends only
            # in a notice to its sender, which has not come yet).
            fake.user_message(OTHER_USER, OTHER_USER, "meanwhile")
            await reply_containing(fake, OTHER_USER, "echo: meanwhile")
            assert fake.sent_messages(USER) == []
            # The sender's next message waits for the one with the file (their order).
            fake.user_message(USER, USER, "and one more thing")
            # The daemon's download timeout ended it: the fake holds the call until release.
            notice = await reply_containing(fake, USER, "report.pdf", timeout=20)
            assert "could not fetch the file 'report.pdf'" in (notice.text or "")
            assert f"within {DOWNLOAD_TIMEOUT} s" in (notice.text or "")
            await reply_containing(fake, USER, "and one more thing", timeout=20)
            fake.release()
        assert_no_token(daemon, fake.token)
    # Told once, and the file was not fetched again behind the user's back.
    assert len([t for t in fake.texts(USER) if t.startswith("I could not fetch")]) == 1
    assert len(fake.calls_to("getFile")) == 1
    assert fake.downloads == []
    journal = AgentJournal(tmp_path / "agent").messages()
    first = next(m for m in journal if "see the report" in m["content"])
    assert not first.get("attachments")
    assert "could not be received" in first["content"]
    later = [m["content"] for m in journal]
    # The chat's order held: the message with the file before the one sent after it.
    joined = "\n".join(later)
    assert joined.index("see the report") < joined.index("and one more thing")
    assert "meanwhile" in joined
