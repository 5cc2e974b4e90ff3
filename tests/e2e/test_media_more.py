"""Files and voice, the remaining paths end to end: the console chat with the echo agent's
`sendfile`, files in a Telegram forum topic through flood control, a Slack audio clip
transcribed.

The two Telegram tests with the usual config share one daemon (each in its own chat, judging
only the calls and log lines made during it); the others start their own.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.media_support import PDF, PNG, put, script_reply
from tests.e2e.slack_support import slack_config
from tests.e2e.telegram_support import USER, assert_no_token, started, telegram_config
from tests.e2e.test_voice import SPOKEN, transcribe
from tests.fakes.server import Call
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, base_config, run_cli, settle, write_config

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The tests on the shared daemon run on one worker (xdist would start it again in each).
SHARED = pytest.mark.xdist_group("test_media_more_shared")

FORUM = -1001234567890
REFUSED_CHAT = 4545  # the private chat of the test of a refused file


@dataclass
class Env:
    fake: FakeTelegram
    daemon: Daemon
    tmp: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("media-more")
    async with FakeTelegram() as fake:
        daemon = Daemon(telegram_config(tmp, fake, allowed_users=[USER, REFUSED_CHAT]))
        async with daemon:
            await started(daemon, fake)
            yield Env(fake, daemon, tmp)
        assert_no_token(daemon, fake.token)
        assert "Traceback" not in daemon.log


@pytest_asyncio.fixture(loop_scope="module")
async def shared(env: Env) -> AsyncIterator[Env]:
    """The module's daemon once it has finished what the tests before gave it, with no fault
    a test scripted on the fake left for the next."""
    await settle(env.tmp / "state" / "picobridge.db", lambda: not env.fake.pending_updates)
    yield env
    env.fake.release()
    env.fake.clear_faults()


def calls_since(fake: FakeTelegram, start: int, method: str) -> list[Call]:
    return [c for c in fake.calls[start:] if c.method == method]


async def logged_since(daemon: Daemon, start: int, pattern: str) -> None:
    regex = re.compile(pattern)
    await daemon.wait_until(lambda: any(regex.search(line)
                                        for line in daemon.log_lines[start:]),
                            what=f"log line /{pattern}/")


async def test_the_console_prints_where_the_echo_agents_files_are(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, err = await run_cli("chat", "--echo", "--config", str(config),
                                   stdin=b"sendfile chart\n")
    assert code == 0, err[-2000:]
    text, *files = out.split("\n")[:-1]
    assert text == ("Here is chart.png, sent through `attachments`, and media-chart.png "
                    "through a MEDIA: line.")
    assert [line.split(" (")[0] for line in files] == ["📎 chart.png", "📎 media-chart.png"]
    for line in files:
        assert "(image/png, " in line
        path = Path(line.rsplit(": ", 1)[1])
        assert path.is_relative_to(tmp_path / "state" / "media" / "outbound")
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")  # noqa: ASYNC240


@SHARED
async def test_files_go_to_the_forum_topic_and_wait_out_flood_control(shared: Env) -> None:
    fake, daemon, tmp = shared.fake, shared.daemon, shared.tmp
    calls, logged = len(fake.calls), len(daemon.log_lines)
    put(tmp, "a.png", PNG)
    put(tmp, "b.pdf", PDF)
    directive = script_reply(tmp, "topic", "In the topic.\nMEDIA: a.png\nMEDIA: b.pdf")
    fake.add_chat(FORUM, "supergroup", is_forum=True)
    name = fake.bot_user["username"]
    fake.fail_next("sendDocument", 429, retry_after=1)
    fake.user_message(FORUM, USER, f"@{name} files here {directive}",
                      message_thread_id=7, is_topic_message=True)
    await fake.wait_for(lambda: len(fake.sent_files(FORUM)) >= 2, "both files",
                        timeout=30)
    await logged_since(daemon, logged, r"retry after 1s|flood control")
    photo, document = fake.sent_files(FORUM)
    assert (photo.kind, document.kind) == ("photo", "document")
    assert {photo.message_thread_id, document.message_thread_id} == {7}
    assert photo.caption == "In the topic." and photo.reply_to_message_id is not None
    assert document.file is not None and document.file.data == PDF
    # The photo went once, before the 429.
    assert len(calls_since(fake, calls, "sendPhoto")) == 1
    assert len(calls_since(fake, calls, "sendDocument")) == 2


async def test_a_slack_audio_clip_is_transcribed(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake,
                              sections={"voice": {"transcribe_command": transcribe()}})
        async with Daemon(config):
            await fake.wait_for_socket()
            clip = fake.add_file(SPOKEN, "audio_message.webm", "audio/webm")
            clip["duration_ms"] = 4200
            clip["subtype"] = "slack_audio"
            event = fake.file_share_message([clip])
            await fake.send_event(event)
            await fake.wait_for_message(channel=event["channel"], predicate=lambda m:
                                        "hello from the voice note" in m.text, timeout=20)
    (message,) = AgentJournal(tmp_path / "agent").messages()
    assert message["content"].startswith("[Voice message, 4 s, transcribed] transcript of ")
    assert message["content"].endswith("hello from the voice note")


async def test_a_streamed_draft_gives_way_to_the_files(tmp_path: Path) -> None:
    put(tmp_path, "a.png", PNG)
    gate = tmp_path / "answer-now"
    directive = script_reply(tmp_path, "drafted", "The picture.\nMEDIA: a.png", hold_until=gate)
    async with FakeTelegram() as fake, \
            Daemon(telegram_config(tmp_path, fake, stream=True)) as daemon:
        await started(daemon, fake)
        fake.user_message(USER, USER, f"a long thought first {directive}")
        await fake.wait_for(lambda: fake.sent_messages(USER), "the streamed draft")
        gate.touch()
        (photo,) = await fake.wait_for(lambda: fake.sent_files(USER), "the photo", timeout=30)
        await fake.wait_for(lambda: fake.sent_messages(USER) == [photo],
                            "only the photo on screen")
    assert photo.caption == "The picture."
    drafts = [m for m in fake.sent_messages(USER, include_deleted=True) if m.kind == "text"]
    assert drafts and all(m.deleted for m in drafts)


@SHARED
async def test_a_file_telegram_refuses_becomes_a_note_with_its_text(shared: Env) -> None:
    fake, daemon, tmp, chat = shared.fake, shared.daemon, shared.tmp, REFUSED_CHAT
    logged = len(daemon.log_lines)
    put(tmp, "odd.png", PNG)
    put(tmp, "fine.pdf", PDF)
    directive = script_reply(tmp, "refused", "Look at this.\nMEDIA: odd.png\nMEDIA: fine.pdf")
    fake.fail_next("sendPhoto", 400, error="Bad Request: IMAGE_PROCESS_FAILED")
    fake.user_message(chat, chat, f"look {directive}")
    (document,) = await fake.wait_for(lambda: fake.sent_files(chat), "the document",
                                      timeout=30)
    log = daemon.log_since(logged)
    note, sent = fake.sent_messages(chat)
    assert note.text == "Look at this.\n\n📎 odd.png could not be sent: Telegram refused it."
    assert sent is document and document.file is not None and document.file.data == PDF
    assert "refused photo odd.png (image_process_failed)" in log.lower()
