"""Telegram end to end: how replies look and how delivery copes with the Bot API's limits and
errors (rendering, splitting, long replies as files, 429 storms, 5xx, permanent refusals).

One daemon serves the tests of the default settings, each in its own chats; the tests of a
reply cap (max_chunks) and of streaming run their own, as those settings change every reply.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.telegram_support import (
    USER,
    SharedDaemon,
    reply_containing,
    shared_daemon,
    started,
    telegram_config,
)
from tests.fakes.telegram import Call, FakeTelegram, SentMessage, utf16_len
from tests.harness import Daemon

# One worker runs the whole module, in order, so the shared daemon is started once.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_telegram_replies")]

# Each test's own people (a private chat has its person's id).
MARKDOWN, HTML, SERVER, BLOCKED, UNICODE = 6301, 6302, 6303, 6304, 6305
FLOODED = [6306, 6307, 6308]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedDaemon]:
    # No coalescing, for the flood test's five messages a chat; the others send one at a
    # time and wait for its answer, where coalescing has nothing to merge.
    tmp = tmp_path_factory.mktemp("telegram-replies")
    async with FakeTelegram() as fake:
        config = telegram_config(tmp, fake, sections={"bridge": {"coalesce": False}},
                                 allowed_users=[MARKDOWN, HTML, SERVER, BLOCKED, UNICODE,
                                                *FLOODED])
        async with shared_daemon(tmp, fake, config) as shared:
            yield shared


@pytest_asyncio.fixture(loop_scope="module")
async def env(module_daemon: SharedDaemon) -> AsyncIterator[SharedDaemon]:
    async with module_daemon.test() as shared:
        yield shared


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


async def test_long_markdown_reply_is_split_without_breaking_code(env: SharedDaemon) -> None:
    markdown, blocks = long_markdown()
    fake = env.fake
    fake.user_message(MARKDOWN, MARKDOWN, markdown, entities=[])
    await reply_containing(fake, MARKDOWN, "def part_3")
    messages = fake.sent_messages(MARKDOWN)
    assert "plain text" not in env.log
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


async def test_html_special_characters_arrive_as_typed(env: SharedDaemon) -> None:
    text = "a < b && c > d, <b>not bold</b> &amp; x<y>z & 1 <2> 3"
    env.fake.user_message(HTML, HTML, text, entities=[])
    reply = await reply_containing(env.fake, HTML, "echo:")
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


async def test_flood_control_keeps_order_and_sends_each_chunk_once(env: SharedDaemon) -> None:
    fake, chats, first = env.fake, FLOODED, FLOODED[0]
    count = 5
    fake.set_flood(every=3, retry_after=1)
    for i in range(count):
        for chat in chats:
            fake.user_message(chat, chat, f"m{i} in {chat}")
    await fake.wait_for(
        lambda: all(len(fake.sent_messages(c)) >= count for c in chats), timeout=40,
        what=f"{count} replies in each chat")
    # A long reply hit by 429 half way resends nothing it already sent.
    markdown, _ = long_markdown()
    fake.user_message(first, first, markdown, entities=[])
    await reply_containing(fake, first, "def part_3", timeout=30)
    fake.set_flood(0)
    refused = [c for c in env.calls if c.method == "sendMessage"]
    assert len(refused) > sum(len(fake.sent_messages(c)) for c in chats)  # some really got 429
    for chat in chats:
        texts = fake.texts(chat)[:count]
        assert texts == [f"echo: m{i} in {chat}" for i in range(count)]
    chunks = fake.texts(first)[count:]
    assert 3 <= len(chunks) <= 4 and len(set(chunks)) == len(chunks)
    assert "Part 0" in chunks[0] and "def part_3" in chunks[-1]
    # Each retry waited for the retry_after Telegram asked for.
    assert [c for c in fake.retries if c.params.get("chat_id") in chats]
    assert [c for c in fake.early_retries if c.params.get("chat_id") in chats] == []
    assert re.search(r"retry in 1\.0s", env.log)


async def test_server_errors_are_retried_and_refusals_are_not(env: SharedDaemon) -> None:
    fake, user, blocked = env.fake, SERVER, BLOCKED

    def sends(chat: int) -> list[Call]:
        return [c for c in env.calls if c.method == "sendMessage"
                and c.params.get("chat_id") == chat]

    fake.fail_next("sendMessage", 502)
    fake.user_message(user, user, "through a 502")
    await reply_containing(fake, user, "echo: through a 502")
    assert len(sends(user)) == 2

    fake.fail_next("sendMessage", 400,
                   error="Bad Request: can't parse entities: unsupported")
    fake.user_message(user, user, "**bold** anyway")
    plain = await reply_containing(fake, user, "echo: bold anyway")
    assert plain.entities == []

    fake.block_chat(blocked)
    fake.user_message(blocked, blocked, "you blocked me")
    await env.wait_for_log(r"failed permanently: Telegram forbids")
    fake.user_message(user, user, "still here")
    await reply_containing(fake, user, "echo: still here")
    assert len(sends(blocked)) == 1


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


async def test_broken_unicode_from_the_agent_or_a_user_is_answered(env: SharedDaemon) -> None:
    # A lone UTF-16 surrogate (valid as a JSON escape, refused by every UTF-8 encoder) must
    # not cost anybody an answer: it arrives as U+FFFD.
    fake, user = env.fake, UNICODE
    fake.user_message(user, user, "tell me #lone-surrogate")
    reply = await reply_containing(fake, user, "echo: tell me")
    assert reply.text is not None and reply.text.endswith("broken \ufffd half")
    fake.user_message(user, user, "half a smiley \ud83d and more")
    reply = await reply_containing(fake, user, "and more")
    assert reply.text == "echo: half a smiley \ufffd and more"
    fake.user_message(user, user, "still fine")
    await reply_containing(fake, user, "echo: still fine")
    assert "Traceback" not in env.log
