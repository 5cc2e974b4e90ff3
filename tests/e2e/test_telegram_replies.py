"""Telegram end to end: how replies look and how delivery copes with the Bot API's limits and
errors (rendering, splitting, long replies as files, 429 storms, 5xx, permanent refusals)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.telegram_support import (
    USER,
    assert_no_token,
    reply_containing,
    started,
    telegram_config,
)
from tests.fakes.telegram import FakeTelegram, SentMessage, utf16_len
from tests.harness import Daemon

CODE_LINE = "    if a < b and c > d: total &= mask  # keep <this> & that\n"


def long_markdown() -> tuple[str, list[str]]:
    """About 10,000 characters of Markdown with headings, lists and four code blocks."""
    parts: list[str] = []
    blocks: list[str] = []
    for n in range(4):
        parts.append(f"## Part {n}\n")
        parts.append(" ".join(f"**word{n}_{i}** and _more_ text" for i in range(40)) + "\n")
        parts.append("\n".join(f"- item {n}.{i} with `code {i}`" for i in range(8)) + "\n")
        body = f"def part_{n}(a, b, c, d, mask):\n" + CODE_LINE * 22
        blocks.append(body)
        parts.append(f"```python\n{body}```\n")
    text = "\n".join(parts)
    assert 9_000 < len(text) < 11_000, len(text)
    return text, blocks


def pre_texts(message: SentMessage) -> list[str]:
    """The text of each pre (code block) entity of a message, offsets in UTF-16."""
    raw = (message.text or "").encode("utf-16-le")
    return [raw[e["offset"] * 2:(e["offset"] + e["length"]) * 2].decode("utf-16-le")
            for e in message.entities if e["type"] == "pre"]


async def test_long_markdown_reply_is_split_without_breaking_code(tmp_path: Path) -> None:
    markdown, blocks = long_markdown()
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, markdown, entities=[])
            await reply_containing(fake, USER, "def part_3")
            messages = fake.sent_messages(USER)
        assert "plain text" not in daemon.log
        assert 3 <= len(messages) <= 4
        for message in messages:
            assert utf16_len(message.text or "") <= 4096
            assert "parse_mode" not in message.params
            assert "```" not in (message.text or "") and "**" not in (message.text or "")
        # Every code block arrives whole, inside one message, as a code entity.
        shown = [pre for m in messages for pre in pre_texts(m)]
        for body in blocks:
            assert body.rstrip("\n") in shown
        # Only the first chunk quotes the user's message.
        assert messages[0].reply_to_message_id is not None
        assert all(m.reply_to_message_id is None for m in messages[1:])
        everything = "\n".join(m.text or "" for m in messages)
        for n in range(4):
            assert f"word{n}_39" in everything and f"item {n}.7" in everything


async def test_html_special_characters_arrive_as_typed(tmp_path: Path) -> None:
    text = "a < b && c > d, <b>not bold</b> &amp; x<y>z & 1 <2> 3"
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, text, entities=[])
            reply = await reply_containing(fake, USER, "echo:")
        assert reply.text == f"echo: {text}"
        assert reply.entities == []


async def test_reply_over_max_chunks_goes_as_a_file(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake, max_chunks=2)) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "big one #huge=12000")
            await fake.wait_for(lambda: any(m.kind == "document"
                                            for m in fake.sent_messages(USER)))
            head, document = fake.sent_messages(USER)
        assert head.kind == "text" and "attached file" in (head.text or "")
        assert utf16_len(head.text or "") < 1500
        assert document.kind == "document" and document.file is not None
        assert document.file.file_name == "reply.md"
        body = document.file.data.decode("utf-8")
        assert body.startswith("HUGE:x") and body.endswith(":END") and len(body) == 12_000


async def test_flood_control_keeps_order_and_sends_each_chunk_once(tmp_path: Path) -> None:
    chats = [USER, 5001, 5002]
    count = 5
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, allowed_users=chats,
                                 sections={"bridge": {"coalesce": False}})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.set_flood(every=3, retry_after=1)
            for i in range(count):
                for chat in chats:
                    fake.user_message(chat, chat, f"m{i} in {chat}")
            await fake.wait_for(
                lambda: all(len(fake.sent_messages(c)) >= count for c in chats), timeout=40,
                what=f"{count} replies in each chat")
            # A long reply hit by 429 half way resends nothing it already sent.
            markdown, _ = long_markdown()
            fake.user_message(USER, USER, markdown, entities=[])
            await reply_containing(fake, USER, "def part_3", timeout=30)
            fake.set_flood(0)
        refused = [c for c in fake.calls if c.method == "sendMessage"]
        assert len(refused) > len(fake.sent_messages())  # some calls really got 429
        for chat in chats:
            texts = fake.texts(chat)[:count]
            assert texts == [f"echo: m{i} in {chat}" for i in range(count)]
        chunks = fake.texts(USER)[count:]
        assert 3 <= len(chunks) <= 4 and len(set(chunks)) == len(chunks)
        assert "Part 0" in chunks[0] and "def part_3" in chunks[-1]
        # Each retry waited for the retry_after Telegram asked for.
        assert fake.retries and fake.early_retries == []
        assert re.search(r"retry in 1\.0s", daemon.log)
        assert_no_token(daemon, fake.token)


async def test_server_errors_are_retried_and_refusals_are_not(tmp_path: Path) -> None:
    blocked = 6001
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, allowed_users=[USER, blocked])
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.fail_next("sendMessage", 502)
            fake.user_message(USER, USER, "through a 502")
            await reply_containing(fake, USER, "echo: through a 502")
            assert len(fake.calls_to("sendMessage")) == 2

            fake.fail_next("sendMessage", 400,
                           error="Bad Request: can't parse entities: unsupported")
            fake.user_message(USER, USER, "**bold** anyway")
            plain = await reply_containing(fake, USER, "echo: bold anyway")
            assert plain.entities == []

            fake.block_chat(blocked)
            fake.user_message(blocked, blocked, "you blocked me")
            await daemon.wait_for_log(r"failed permanently: Telegram forbids")
            fake.user_message(USER, USER, "still here")
            await reply_containing(fake, USER, "echo: still here")
        assert len([c for c in fake.calls_to("sendMessage") if c.params["chat_id"] == blocked]) == 1
        assert_no_token(daemon, fake.token)


async def test_streaming_and_tool_status(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, stream=True, show_tools=True)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "stream **this** #tool #slow=1")
            final = await reply_containing(fake, USER, "echo: stream this")
            await fake.wait_for(lambda: bool(fake.calls_to("deleteMessage")))
        # The tool status was shown and then removed; the streamed draft became the answer.
        statuses = [m for m in fake.sent_messages(USER, include_deleted=True)
                    if (m.text or "").startswith("🔧")]
        assert statuses and all(m.deleted for m in statuses)
        assert final.entities == [{"type": "bold", "offset": 13, "length": 4}]
        visible = fake.sent_messages(USER)
        assert visible == [final]
        if final.edits:
            assert fake.calls_to("editMessageText")


async def test_broken_unicode_from_the_agent_or_a_user_is_answered(tmp_path: Path) -> None:
    # A lone UTF-16 surrogate (valid as a JSON escape, refused by every UTF-8 encoder) must
    # not cost anybody an answer: it arrives as U+FFFD.
    async with FakeTelegram() as fake:
        async with Daemon(telegram_config(tmp_path, fake)) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "tell me #lone-surrogate")
            reply = await reply_containing(fake, USER, "echo: tell me")
            assert reply.text is not None and reply.text.endswith("broken \ufffd half")
            fake.user_message(USER, USER, "half a smiley \ud83d and more")
            reply = await reply_containing(fake, USER, "and more")
            assert reply.text == "echo: half a smiley \ufffd and more"
            fake.user_message(USER, USER, "still fine")
            await reply_containing(fake, USER, "echo: still fine")
        assert "Traceback" not in daemon.log
        assert_no_token(daemon, fake.token)
