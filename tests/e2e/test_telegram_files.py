"""Telegram end to end: files users send (text inline, the rest saved under state_dir/media),
albums as one message, and files over the limits refused with a clear reply.

One daemon serves the tests of the default settings, each in its own chat; the test of a
lower attachments.max_bytes and the proxy's (the daemon's environment) run their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.telegram_support import (
    STRANGER,
    USER,
    NewMessages,
    SharedDaemon,
    reply_containing,
    shared_daemon,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, proc_status_kib

# One worker runs the whole module, in order, so the shared daemon is started once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_files")]

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40
# Each test's own person (their private chat has their id).
SENDER, ALBUM, HUGE = 6501, 6502, 6503


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    tmp = tmp_path_factory.mktemp("telegram-files")
    async with FakeTelegram() as fake:
        config = telegram_config(tmp, fake, allowed_users=[SENDER, ALBUM, HUGE])
        async with shared_daemon(tmp, fake, config) as shared:
            yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def env(module_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_daemon.test() as shared:
        yield shared


async def test_text_file_inline_and_photo_saved(env: SharedDaemon) -> None:
    fake, user, messages = env.fake, SENDER, NewMessages(env)
    downloads = len(fake.downloads)
    fake.user_document(user, user, b"line one\nline two <&>\n", "notes.txt", "text/plain",
                       caption="summarise this")
    reply = await reply_containing(fake, user, "summarise this")
    assert "[Attachment: notes.txt]" in (reply.text or "")
    fake.user_photo(user, user, JPEG, caption="what is this?", width=800, height=600)
    await reply_containing(fake, user, "what is this?")
    fake.user_document(user, user, b"secret", "../../etc/passwd", "application/pdf")
    await fake.wait_for(lambda: len(fake.sent_messages(user)) == 3)
    first, photo, sneaky = messages()
    assert first["content"] == "summarise this"
    assert first["attachments"] == [{"name": "notes.txt",
                                     "content": "line one\nline two <&>\n"}]
    # Only the largest photo size is fetched; the agent learns path, size and type.
    assert photo["content"] == "what is this?"
    (attachment,) = photo["attachments"]
    assert attachment["name"].endswith(".jpg")
    assert f"size: {len(JPEG)} bytes" in attachment["content"]
    assert "type: image/jpeg" in attachment["content"]
    path = Path(attachment["content"].split("saved to ", 1)[1].split("\n", 1)[0])
    media = (env.tmp / "state" / "media").resolve()
    assert path.is_absolute() and path.is_relative_to(media)
    assert path.read_bytes() == JPEG  # noqa: ASYNC240 (a test's check, nothing waits)
    assert len([d for d in fake.downloads[downloads:] if d.startswith("photos/")]) == 1
    # A hostile file name stays inside the media folder.
    saved = Path(sneaky["attachments"][0]["content"].split("saved to ", 1)[1].split("\n")[0])
    assert saved.is_relative_to(media)
    assert saved.read_bytes() == b"secret"  # noqa: ASYNC240
    assert ".." not in saved.name and "/" not in sneaky["attachments"][0]["name"]


async def test_album_arrives_as_one_message(env: SharedDaemon) -> None:
    fake, user, messages = env.fake, ALBUM, NewMessages(env)
    fake.user_photo(user, user, JPEG, caption="two views", media_group_id="alb1")
    fake.user_photo(user, user, JPEG[::-1], media_group_id="alb1")
    fake.user_voice(user, user, b"OggS voice bytes")
    await reply_containing(fake, user, "two views")
    await fake.wait_for(lambda: len(fake.sent_messages(user)) == 2)
    album, voice = messages()
    assert album["content"] == "two views"
    assert len(album["attachments"]) == 2
    assert len(voice["attachments"]) == 1 and "audio/ogg" in voice["attachments"][0]["content"]
    assert len(fake.sent_messages(user)) == 2


async def test_a_download_is_cut_at_the_limit_whatever_getfile_claimed(
        env: SharedDaemon) -> None:
    """getFile says 100 bytes, the file server streams 300 MB: reading stops at
    attachments.max_bytes, the daemon's memory barely moves, and the sender is told."""
    fake, user, messages, daemon = env.fake, HUGE, NewMessages(env), env.daemon
    streamed = 300 * 1024 * 1024
    fake.user_message(user, user, "warm up")
    await reply_containing(fake, user, "echo: warm up")
    assert daemon.proc is not None
    pid = daemon.proc.pid
    idle = proc_status_kib(pid, "VmRSS")
    # From here VmHWM is the peak of what follows (clear_refs 5 resets it).
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # noqa: ASYNC240 (procfs, instant)
    stored = fake.add_file(b"", "huge.bin", "application/octet-stream",
                           file_size=100, streamed_size=streamed)
    fake.user_message(user, user, caption="take this", document=stored)
    told = await reply_containing(
        fake, user, "'huge.bin' is over 20.0 MB, the most I can take", timeout=60)
    answer = await reply_containing(fake, user, "echo: take this", timeout=60)
    peak = proc_status_kib(pid, "VmHWM")
    assert "could not be received" in (answer.text or "")
    await fake.wait_for(lambda: stored.file_path in fake.streamed_bytes)
    assert told.text is not None
    assert (peak - idle) < 30 * 1024, f"peak {peak} KiB, idle {idle} KiB"
    assert fake.streamed_bytes[stored.file_path] < streamed
    _, took = messages()
    assert took["content"].startswith("take this\n") and "attachments" not in took


async def test_files_over_the_limits_are_refused_clearly(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections={"attachments": {"max_bytes": 4000}})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            huge = fake.add_file(b"x" * 100, "movie.mp4", "video/mp4", kind="video",
                                 file_size=30 * 1024 * 1024)
            fake.user_message(USER, USER, video=huge)
            refusal = await reply_containing(fake, USER, "movie.mp4")
            assert "MB" in (refusal.text or "")
            fake.user_document(USER, USER, b"y" * 5000, "big.bin", caption="and this")
            await reply_containing(fake, USER, "'big.bin' is 5,000 bytes")
            answer = await reply_containing(fake, USER, "echo: and this")
            assert "could not be received" in (answer.text or "")
            # A stranger's file is never fetched.
            fake.user_document(STRANGER, STRANGER, b"z" * 10, "a.txt", "text/plain")
            await reply_containing(fake, STRANGER, "picobridge access allow")
        assert fake.downloads == []
        (only,) = AgentJournal(tmp_path / "agent").messages()
        assert "attachments" not in only


async def test_files_come_through_the_proxy_the_environment_names(tmp_path: Path) -> None:
    """HTTP_PROXY is honoured for downloads as for the bot's calls: the Bot API host does not
    exist, so only the proxy (the fake itself, which serves absolute-form requests by path)
    can hand the file over."""
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, base_url="http://api.telegram.invalid/bot",
                                 base_file_url="http://api.telegram.invalid/file/bot")
        env = {"HTTP_PROXY": fake.url, "http_proxy": fake.url, "NO_PROXY": "", "no_proxy": ""}
        async with Daemon(config, env=env) as daemon:
            await started(daemon, fake)
            fake.user_document(USER, USER, b"via the proxy\n", "proxied.txt", "text/plain",
                               caption="proxied")
            reply = await reply_containing(fake, USER, "proxied")
        assert "via the proxy" in (reply.text or "")
        assert len(fake.downloads) == 1  # fetched, not only named
        (message,) = AgentJournal(tmp_path / "agent").messages()
        assert message["attachments"] == [{"name": "proxied.txt", "content": "via the proxy\n"}]
