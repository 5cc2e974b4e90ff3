"""Discord end to end: the gateway drops, asks for a new session, or the daemon is down or
killed; every message is answered, none twice; the time since it last delivered is exported."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections import Counter
from pathlib import Path

from tests.e2e.discord_support import assert_no_token, discord_config, online
from tests.fakes.discord import DEFAULT_USER, FakeDiscord
from tests.harness import AgentJournal, Daemon, free_port

TAG = re.compile(r"\bt(\d+)-(\d+)\b")


async def test_a_dropped_connection_is_resumed_and_what_came_meanwhile_is_answered(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("before")
            await fake.wait_for_reply(dm, "echo: before")
            await fake.drop_connection()
            fake.dm("while away")  # kept by the session; replayed after RESUME
            await fake.wait_ready(2)
            await fake.wait_for_reply(dm, "echo: while away")
            assert (fake.identifies, fake.resumes) == (1, 1)
            # zlib-stream as discord.py asks for it, and heartbeats on both connections.
            assert all(c.query.get("compress") == "zlib-stream" for c in fake.connections)
            assert fake.connections[0].heartbeats >= 1
        assert [m.content for m in fake.messages_in(dm)] == ["echo: before", "echo: while away"]
        assert_no_token(daemon, fake)


async def test_an_invalidated_session_starts_again_and_reads_what_it_missed(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("before")
            await fake.wait_for_reply(dm, "echo: before")
            await fake.invalidate_session()
            # Written while no session stood: the gateway never delivers it.
            fake.say(dm, "lost by the gateway", deliver=False)
            await fake.wait_ready(2)
            await fake.wait_for_reply(dm, "echo: lost by the gateway")
            assert (fake.identifies, fake.resumes) == (2, 0)
        assert [m.content for m in fake.messages_in(dm)] == [
            "echo: before", "echo: lost by the gateway"]


async def test_messages_sent_while_the_daemon_was_down_are_answered_in_order(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        config = discord_config(tmp_path, fake)
        dm = fake.dm_channel(DEFAULT_USER).id
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            fake.dm("first")
            await fake.wait_for_reply(dm, "echo: first")
        for n in range(3):
            fake.say(dm, f"while down {n}", deliver=False)
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            await fake.wait_for_reply(dm, "while down 2")
            await daemon.wait_for_log(r"catching up \d+ message\(s\) in Discord channel")
        texts = [m.content for m in fake.messages_in(dm)]
        assert texts[0] == "echo: first"
        # Each answered once, in the order written (a coalesced turn answers several).
        answered = " ".join(texts[1:])
        assert [int(n) for n in re.findall(r"while down (\d)", answered)] == [0, 1, 2]
        contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert contents.count("first") == 1


def answered(fake: FakeDiscord) -> Counter[tuple[int, int]]:
    seen: Counter[tuple[int, int]] = Counter()
    for message in fake.sent:
        for user, index in TAG.findall(message.content):
            seen[(int(user), int(index))] += 1
    return seen


async def test_sigkill_in_the_middle_of_the_catch_up_loses_nothing(tmp_path: Path) -> None:
    users = [str(500000000000000000 + n) for n in range(8)]
    per_user = 5
    everything = {(int(u), i) for u in users for i in range(1, per_user + 1)}
    async with FakeDiscord() as fake:
        for user in users:
            fake.add_user(user, f"u{user[-2:]}")
        config = discord_config(tmp_path, fake, allowed_users=users)
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            for user in users:
                fake.dm(f"t{user}-0", user=user)
            await fake.wait_for(lambda: len(answered(fake)) == len(users), timeout=60)
        # The backlog: written while the daemon was down.
        for i in range(1, per_user + 1):
            for user in users:
                fake.say(fake.dm_channel(user).id, f"t{user}-{i}", user, deliver=False)
        daemon = await Daemon(config).start()
        try:
            await online(daemon, fake)
            await fake.wait_for(lambda: len(answered(fake)) >= len(users) + 6, timeout=60)
        finally:
            await daemon.kill()
        before = len(answered(fake)) - len(users)
        assert before < len(everything), "the kill came too late to test anything"

        restarted = await Daemon(config).start()
        try:
            await fake.wait_for(lambda: set(answered(fake)) >= everything, timeout=90,
                                what="every message answered after the restart")
        finally:
            await restarted.stop()

    journal = Counter((int(u), int(i)) for m in AgentJournal(tmp_path / "agent").messages()
                      for u, i in TAG.findall(m["content"]))
    counts = answered(fake)
    twice = {tag for tag, n in counts.items() if n > 1}
    print(f"\n{len(everything)} messages in the backlog, {before} answered before SIGKILL, "
          f"{len(twice)} answered twice, {sum(n > 1 for n in journal.values())} seen twice by "
          "the agent")
    assert set(journal) >= everything
    # Only what was in flight at the kill may go twice: a turn the agent was on (asked again)
    # or a reply sent but not yet marked sent, at most one per conversation.
    replies = Counter((m.channel_id, m.content) for m in fake.sent)
    repeated = [text for (_, text), n in replies.items() if n > 1]
    assert len(repeated) <= len(users), repeated
    explained = {(int(u), int(i)) for text in repeated for u, i in TAG.findall(text)}
    explained |= {tag for tag, n in journal.items() if n > 1}
    assert twice <= explained, sorted(twice - explained)
    assert_no_token(restarted, fake)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


async def test_the_time_since_discord_last_delivered_is_exported(tmp_path: Path) -> None:
    port = free_port()
    async with FakeDiscord() as fake:
        config = discord_config(tmp_path, fake,
                                sections={"http": {"listen": f"127.0.0.1:{port}"}})
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("hello")
            await fake.wait_for_reply(dm, "echo: hello")
            health = json.loads(await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz"))
            assert "discord" in health["platforms_last_event_seconds"], health
            assert health["platforms_last_event_seconds"]["discord"] >= 0
            metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
            assert ('picobridge_platform_last_event_age_seconds{bot="default",platform="discord"}'
                    in metrics)
