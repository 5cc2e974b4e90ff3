"""Discord end to end: long replies split at 2,000 characters without cutting code, very long
ones as a file, 429s waited out with the order kept, files in and out.

One daemon serves the module (its inbound file limit, 4,000 bytes, is the files test's; the
others send no files in); every test talks as its own person in their own DM. Streaming, a
config of its own, starts its own daemon.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.discord_support import (
    add_people,
    agent_messages,
    assert_no_token,
    discord_config,
    online,
)
from tests.e2e.media_support import PDF, PNG, put, script_reply
from tests.fakes.discord import DEFAULT_USER, FakeDiscord
from tests.fakes.server import Call
from tests.harness import Daemon, http_port

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("discord_replies")]

LONG, LIMITED, FILES_IN, FILES_OUT = (f"4000000000000001{n}" for n in (21, 22, 23, 24))


@dataclass
class Env:
    fake: FakeDiscord
    daemon: Daemon
    tmp: Path  # the daemon's folder (state, the fake agent's state and workspace)
    port: int  # its HTTP listener


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("discord-replies")
    async with FakeDiscord() as fake:
        add_people(fake, {LONG: "lena", LIMITED: "leo", FILES_IN: "fay", FILES_OUT: "otto"})
        config = discord_config(tmp, fake, allowed_users=[LONG, LIMITED, FILES_IN, FILES_OUT],
                                sections={"http": {"listen": "127.0.0.1:0"},
                                          "attachments": {"max_bytes": 4000}})
        daemon = Daemon(config)
        async with daemon:
            port = await http_port(daemon)
            await online(daemon, fake)
            yield Env(fake, daemon, tmp, port)
        assert_no_token(daemon, fake)
        assert "Traceback" not in daemon.log


def calls_since(fake: FakeDiscord, mark: int, method: str | None = None) -> list[Call]:
    return [c for c in fake.calls[mark:] if method is None or c.method == method]


def balanced(text: str) -> bool:
    return sum(line.startswith("```") for line in text.split("\n")) % 2 == 0


async def test_long_replies_are_split_without_cutting_code_and_huge_ones_go_as_a_file(
        env: Env) -> None:
    fake = env.fake
    code = "\n".join(f"line_{n} = {n} * 2  # some code" for n in range(90))
    text = "Here is the code:\n\n```python\n" + code + "\n```\n\nThat was it. <@1> @everyone"
    dm = fake.dm_channel(LONG).id
    fake.dm(text, LONG)
    await fake.wait_for_reply(dm, "That was it.")
    parts = fake.messages_in(dm)
    assert len(parts) >= 2
    # The code block is cut, closed and reopened: every part renders as it should.
    assert all(len(p.content) <= 2000 and balanced(p.content) for p in parts)
    assert sum("```python" in p.content for p in parts) >= 2
    joined = "\n".join(p.content for p in parts)
    assert all(f"line_{n} = {n} * 2" in joined for n in range(90))
    # Only the first part quotes the question; Discord's own syntax is escaped.
    assert parts[0].reference is not None
    assert all(p.reference is None for p in parts[1:])
    assert parts[-1].content.endswith("That was it. \\<@1> \\@everyone")
    fake.dm("a huge one #huge=20000", LONG)
    note = await fake.wait_for_reply(dm, "attached as a file")
    assert [a["filename"] for a in note.attachments] == ["reply.md"]
    (upload,) = [u for u in fake.uploads if u[0] == dm and u[1] == "reply.md"]
    assert upload[2].decode().startswith("HUGE:") and upload[2].endswith(b":END")


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def counted_429s(metrics: str) -> float:
    counted = re.search(r'^picobridge_platform_429_total\{bot="default",'
                        r'platform="discord"\} (\S+)$', metrics, re.M)
    assert counted is not None
    return float(counted[1])


async def test_429s_are_waited_out_and_replies_keep_their_order(env: Env) -> None:
    fake = env.fake
    metrics_url = f"http://127.0.0.1:{env.port}/metrics"
    # The shared daemon's counter and the fake's records hold the earlier tests' too.
    counted_before = counted_429s(await asyncio.to_thread(get, metrics_url))
    mark, early_mark = len(fake.calls), len(fake.early_retries)
    dm = fake.dm_channel(LIMITED).id
    try:
        fake.rate_limit_next("create_message", 1.5)
        fake.dm("one", LIMITED)
        await fake.wait_for_reply(dm, "one")
        fake.rate_limit_next("create_message", 1.0, is_global=True)
        for word in ("two", "three", "four"):
            fake.dm(word, LIMITED)
        await fake.wait_for_reply(dm, "four")
        # A 502 (discord.py tries again) and a dropped connection (the outbox tries again):
        # each reply arrives once all the same.
        fake.fail_next("create_message", 502)
        fake.dm("five", LIMITED)
        await fake.wait_for_reply(dm, "five")
        fake.disconnect_next("create_message")
        fake.dm("six", LIMITED)
        await fake.wait_for_reply(dm, "six")
    finally:
        # Faults not used up (the test failed early) must not meet the next test.
        fake.clear_faults()
        fake.clear_rate_limits()
    # discord.py waits the 429s out itself; /metrics counts them all the same.
    counted = counted_429s(await asyncio.to_thread(get, metrics_url)) - counted_before
    # At least the two replies' 429s; a typing call meeting the global limit may add
    # one (one clean-clone run counted 4 of the fake's 5: which one went uncounted
    # was not found).
    replies_limited = len([c for c in calls_since(fake, mark, "create_message")
                           if c.status == 429])
    assert replies_limited <= counted <= len(
        [c for c in calls_since(fake, mark) if c.status == 429])
    assert replies_limited == 2
    statuses = [c.status for c in calls_since(fake, mark, "create_message")]
    assert 502 in statuses and 0 in statuses
    # No reply came back before its wait was over (Discord would have answered 429
    # again). A typing call already on its way when the global limit began may meet it.
    assert [b for b in fake.early_retries[early_mark:] if b.startswith("create_message")] == []
    words = " ".join(m.content for m in fake.messages_in(dm))
    assert [w for w in words.split() if w in ("one", "two", "three", "four", "five", "six")
            ] == ["one", "two", "three", "four", "five", "six"]


async def test_files_in_are_downloaded_for_the_agent_and_too_big_ones_refused(
        env: Env) -> None:
    fake = env.fake
    mark = len(fake.calls)
    dm = fake.dm_channel(FILES_IN).id
    fake.dm("summarise this", FILES_IN, files=(("notes.txt", b"line one\nline two\n",
                                                "text/plain"),))
    reply = await fake.wait_for_reply(dm, "summarise this")
    assert "[Attachment: notes.txt]" in reply.content
    fake.dm("and this", FILES_IN,
            files=(("big.bin", b"\0" * 5000, "application/octet-stream"),))
    refused = await fake.wait_for_reply(dm, "could not be received")
    assert "big.bin" in refused.content
    # The sender hears it at once, not only through the agent.
    told = await fake.wait_for_reply(dm, "The file 'big.bin' is")
    assert told.reference is not None
    # A size declared too small: the download stops at the limit.
    fake.dm("and that", FILES_IN,
            files=(("liar.bin", b"\1" * 50_000, "application/octet-stream"),),
            declared_size=100)
    told = await fake.wait_for_reply(dm, "The file 'liar.bin' is 48 KB")
    assert "up to 4,000 bytes" in told.content
    first, second, third = agent_messages(env.tmp / "agent", dm)
    assert first["attachments"] == [{"name": "notes.txt",
                                     "content": "line one\nline two\n"}]
    assert "attachments" not in second and "attachments" not in third
    # The big file was refused by its declared size, before any download.
    assert len(calls_since(fake, mark, "download")) == 2


async def test_files_from_the_agent_arrive_with_the_text(env: Env) -> None:
    fake = env.fake
    put(env.tmp, "out/report.pdf", PDF)
    put(env.tmp, "chart.png", PNG)
    directive = script_reply(env.tmp, "files",
                             "Here you go.\nMEDIA: out/report.pdf\n![the chart](chart.png)\n")
    dm = fake.dm_channel(FILES_OUT).id
    fake.dm(f"files please {directive}", FILES_OUT)
    share = await fake.wait_for(
        lambda: next((m for m in fake.messages_in(dm) if m.attachments), None),
        "a message with files")
    assert share.content.startswith("Here you go.")
    assert sorted(a["filename"] for a in share.attachments) == ["chart.png", "report.pdf"]
    uploads = {name: data for channel, name, data in fake.uploads if channel == dm}
    assert uploads["report.pdf"] == PDF and uploads["chart.png"] == PNG
    assert len(fake.messages_in(dm)) == 1


# Streaming is a config of its own: its own daemon.


async def test_a_streamed_answer_is_one_message_edited_into_the_answer(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        config = discord_config(tmp_path, fake, "--delta-chars", "3", stream=True)
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("stream this answer please")
            await fake.wait_for(
                lambda: any(m.content == "echo: stream this answer please"
                            for m in fake.messages_in(dm)), "the final answer")
            fake.dm("and a second one")
            await fake.wait_for_reply(dm, "echo: and a second one")
        first, second = fake.messages_in(dm)
        # The draft (shown with " …" while written) became the answer: one message each.
        assert first.edits >= 1 and second.edits >= 1
        assert first.content == "echo: stream this answer please"
        assert [c for c in fake.calls_to("create_message")
                if str(c.params.get("content", "")).endswith(" …")]
