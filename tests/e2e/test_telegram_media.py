"""Telegram end to end: files an agent sends (picobot `attachments`, `MEDIA:` lines, Markdown
images) arrive as photos, albums, voice notes, audio and documents with their exact bytes;
what may not be sent is a note; a SIGKILL between two files sends each file once.

One daemon serves the module's tests, each in its own chat, with files of its own names;
the SIGKILL test and the echo agent's (another agent) run their own.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from picobridge.cli import echo_agent
from tests.e2e.media_support import JPEG, MP3, OPUS, PDF, PNG, PNG_2, put, script_reply
from tests.e2e.telegram_support import (
    USER,
    SharedDaemon,
    reply_containing,
    shared_daemon,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import AgentJournal, Daemon

# One worker runs the whole module, in order, so the shared daemon is started once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_media")]

# Each test's own person (their private chat has their id).
FILES, ALBUM, UNSAFE, CLEANUP = 6401, 6402, 6403, 6404


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    tmp = tmp_path_factory.mktemp("telegram-media")
    async with FakeTelegram() as fake:
        config = telegram_config(tmp, fake, allowed_users=[FILES, ALBUM, UNSAFE, CLEANUP])
        async with shared_daemon(tmp, fake, config) as shared:
            yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def env(module_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_daemon.test() as shared:
        yield shared


async def sent_files(fake: FakeTelegram, count: int, chat: int = USER) -> list[SentMessage]:
    """The bot's messages with files in `chat`, once there are `count`."""
    def enough() -> list[SentMessage] | None:
        files = fake.sent_files(chat)
        return files if len(files) >= count else None

    return await fake.wait_for(enough, f"{count} files", timeout=30)


def data(message: SentMessage) -> bytes:
    assert message.file is not None
    return message.file.data


async def test_attachments_media_lines_and_images_arrive_with_their_bytes(
        env: SharedDaemon) -> None:
    fake, tmp = env.fake, env.tmp
    put(tmp, "out/report.pdf", PDF)
    put(tmp, "chart.png", PNG)
    photo = put(tmp, "shots/pic.jpg", JPEG)
    directive = script_reply(
        tmp, "files", "Here you go.\nMEDIA: out/report.pdf\n![the chart](chart.png)\n"
        "```\nMEDIA: not/a/file.txt\n```\nDone.",
        [{"name": "notes.md", "content": "# Notes\nline two\n"},
         {"name": "pic.jpg", "path": str(photo)}])
    fake.user_message(FILES, FILES, f"send me the files {directive}")
    files = await sent_files(fake, 4, FILES)
    assert [(m.kind, m.file.file_name if m.file else None) for m in files] == [
        ("document", "notes.md"), ("photo", "pic.jpg"), ("document", "report.pdf"),
        ("photo", "chart.png")]
    assert [data(m) for m in files] == [b"# Notes\nline two\n", JPEG, PDF, PNG]
    # The text rides as the first file's caption, without the lines that named files; the
    # code block is the agent's text, not a file.
    caption = files[0].caption or ""
    assert caption.startswith("Here you go.") and caption.endswith("Done.")
    assert "MEDIA: not/a/file.txt" in caption
    assert "out/report.pdf" not in caption and "![" not in caption
    assert files[3].caption == "the chart"
    assert len(fake.sent_messages(FILES)) == 4  # no separate text message


async def test_albums_voice_audio_and_a_long_text_first(env: SharedDaemon) -> None:
    fake, tmp = env.fake, env.tmp
    for name, blob in (("a.png", PNG), ("b.png", PNG_2), ("c.jpg", JPEG), ("note.ogg", OPUS),
                       ("song.mp3", MP3)):
        put(tmp, name, blob)
    long_text = "A long answer. " * 100  # over a caption's 1,024 characters
    directive = script_reply(tmp, "album", long_text + "\nMEDIA: a.png\nMEDIA: b.png\n"
                             "MEDIA: c.jpg\nMEDIA: note.ogg\nMEDIA: song.mp3")
    fake.user_message(ALBUM, ALBUM, f"an album please {directive}")
    await fake.wait_for(lambda: len(fake.sent_files(ALBUM)) >= 5, "five files")
    album_calls = [c for c in env.calls if c.method == "sendMediaGroup"]
    sent = fake.sent_messages(ALBUM)
    assert sent[0].kind == "text" and (sent[0].text or "").startswith("A long answer.")
    kinds = [m.kind for m in sent[1:]]
    assert kinds == ["photo", "photo", "photo", "voice", "audio"]
    assert len(album_calls) == 1
    groups = {m.raw.get("media_group_id") for m in sent[1:4]}
    assert len(groups) == 1 and None not in groups
    assert [data(m) for m in sent[1:]] == [PNG, PNG_2, JPEG, OPUS, MP3]
    assert all(not m.caption for m in sent[1:])


async def test_what_may_not_be_sent_is_a_note_and_the_rest_arrives(env: SharedDaemon) -> None:
    fake, tmp = env.fake, env.tmp
    outside = tmp / "secret.txt"
    outside.write_text("not for the chat")
    link = put(tmp, "link.txt", b"")
    link.unlink()
    link.symlink_to(outside)
    put(tmp, "ok.pdf", PDF)
    directive = script_reply(
        tmp, "unsafe", "Take these.\nMEDIA: /etc/passwd\nMEDIA: ../../secret.txt\n"
        "MEDIA: link.txt\nMEDIA: gone.png\nMEDIA: ok.pdf")
    fake.user_message(UNSAFE, UNSAFE, f"files {directive}")
    (sent,) = await fake.wait_for(lambda: fake.sent_files(UNSAFE), "the one file")
    log = env.log
    assert sent.file is not None and sent.file.data == PDF
    caption = sent.caption or ""
    assert caption.startswith("Take these.")
    for name in ("passwd", "secret.txt", "link.txt"):
        assert f"📎 {name} was not sent: withheld" in caption
    assert "📎 gone.png was not sent: the file was not found" in caption
    assert "not for the chat" not in caption
    # The log says why; the chat only that it was withheld.
    assert "outside attachments.outbound_dirs" in log and "/etc/passwd" in log
    assert str(outside) in log


async def test_a_file_the_agent_deletes_at_once_is_still_delivered(env: SharedDaemon) -> None:
    fake, tmp = env.fake, env.tmp
    temp = put(tmp, "tmp/plot.png", PNG)
    directive = script_reply(tmp, "cleanup", "![plot](tmp/plot.png)",
                             delete_after=[temp])
    journal = AgentJournal(tmp / "agent")
    before = len(journal.messages())
    fake.user_message(CLEANUP, CLEANUP, f"plot it {directive}")
    await journal.wait_until(lambda j: len(j.messages()) == before + 1)
    # The agent deletes its file when this arrives: as soon as the bridge, done with the
    # answer, gives it the chat's next message.
    fake.user_message(CLEANUP, CLEANUP, "next")
    await reply_containing(fake, CLEANUP, "echo: next")
    (sent,) = fake.sent_files(CLEANUP)
    assert not temp.exists()
    assert sent.kind == "photo" and data(sent) == PNG and sent.caption == "plot"


async def test_sigkill_after_the_text_and_one_of_three_files_sends_the_rest_once(
        tmp_path: Path) -> None:
    names = ["one.pdf", "two.pdf", "three.pdf"]
    for number, name in enumerate(names):
        put(tmp_path, name, PDF + bytes([number]))
    directive = script_reply(tmp_path, "three", "Too long for a caption. " * 60 + "\n"
                             + "\n".join(f"MEDIA: {n}" for n in names))
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        daemon = await Daemon(config).start()
        try:
            await started(daemon, fake)
            # The first file is let through; the second is held until the daemon dies.
            fake.stall_next("sendDocument")
            fake.user_message(USER, USER, f"three files {directive}")
            await fake.wait_for_call("sendDocument")
            fake.release("sendDocument")
            fake.stall_next("sendDocument")
            await fake.wait_for_call("sendDocument", count=2)
            await daemon.kill()
        finally:
            await daemon.kill()
        assert [m.file.file_name for m in fake.sent_files(USER) if m.file] == ["one.pdf"]
        assert len(fake.sent_messages(USER)) == 2
        fake.release("sendDocument")
        async with Daemon(config):
            await fake.wait_for(lambda: len(fake.sent_files(USER)) >= 3, "the other two files",
                                timeout=30)
            # The chat's next answer comes after everything of the one before.
            fake.user_message(USER, USER, "and now?")
            await reply_containing(fake, USER, "echo: and now?", timeout=30)
    sent = fake.sent_messages(USER)
    assert [m.kind for m in sent] == ["text", "document", "document", "document", "text"]
    assert [m.file.file_name for m in sent[1:4] if m.file] == names
    assert [data(m) for m in sent[1:4]] == [PDF + bytes([n]) for n in range(3)]
    # The bridge kept the files once, when the answer came: the restart sent those copies.
    assert len(os.listdir(tmp_path / "state" / "media" / "outbound")) == 1


async def test_the_echo_agents_sendfile_arrives_as_photos(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, agent={"command": echo_agent.command()})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "sendfile chart")
            await reply_containing(fake, USER, "Here is chart.png")
            files = await sent_files(fake, 2)
    assert [m.kind for m in files] == ["photo", "photo"]
    assert all(data(m).startswith(b"\x89PNG\r\n\x1a\n") for m in files)
