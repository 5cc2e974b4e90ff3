"""Discord end to end: the gateway drops, asks for a new session, or the daemon is down or
killed; every message is answered, none twice; the time since it last delivered is exported.

One daemon serves the tests whose faults are the gateway's (a dropped connection, an
invalidated session) and the export, each as its own person in their own DM; the tests of a
daemon that is down or SIGKILLed start (and restart) their own.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.discord_support import add_people, assert_no_token, discord_config, online
from tests.fakes.discord import DEFAULT_USER, FakeDiscord
from tests.harness import AgentJournal, Daemon, http_port

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The tests of the shared daemon: on one worker, one after another.
SHARED = pytest.mark.xdist_group("discord_gateway")

TAG = re.compile(r"\bt(\d+)-(\d+)\b")
DROPPED, INVALIDATED, EXPORTED = (f"4000000000000001{n}" for n in (31, 32, 33))


@dataclass
class Env:
    fake: FakeDiscord
    daemon: Daemon
    port: int  # the daemon's HTTP listener


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("discord-gateway")
    async with FakeDiscord() as fake:
        add_people(fake, {DROPPED: "dora", INVALIDATED: "ivan", EXPORTED: "exa"})
        config = discord_config(tmp, fake, allowed_users=[DROPPED, INVALIDATED, EXPORTED],
                                sections={"http": {"listen": "127.0.0.1:0"}})
        daemon = Daemon(config)
        async with daemon:
            port = await http_port(daemon)
            await online(daemon, fake)
            yield Env(fake, daemon, port)
        assert_no_token(daemon, fake)
        assert "Traceback" not in daemon.log


def sessions(fake: FakeDiscord) -> tuple[int, int]:
    return fake.identifies, fake.resumes


@SHARED
async def test_a_dropped_connection_is_resumed_and_what_came_meanwhile_is_answered(
        env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(DROPPED).id
    fake.dm("before", DROPPED)
    await fake.wait_for_reply(dm, "echo: before")
    (identifies, resumes), first = sessions(fake), len(fake.connections) - 1
    await fake.drop_connection()
    fake.dm("while away", DROPPED)  # kept by the session; replayed after RESUME
    await fake.wait_ready(identifies + resumes + 1)
    await fake.wait_for_reply(dm, "echo: while away")
    assert sessions(fake) == (identifies, resumes + 1)
    # zlib-stream as discord.py asks for it, and heartbeats on both connections.
    assert all(c.query.get("compress") == "zlib-stream" for c in fake.connections[first:])
    assert fake.connections[first].heartbeats >= 1
    assert [m.content for m in fake.messages_in(dm)] == ["echo: before", "echo: while away"]


@SHARED
async def test_an_invalidated_session_starts_again_and_reads_what_it_missed(
        env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(INVALIDATED).id
    fake.dm("before", INVALIDATED)
    await fake.wait_for_reply(dm, "echo: before")
    identifies, resumes = sessions(fake)
    await fake.invalidate_session()
    # Written while no session stood: the gateway never delivers it.
    fake.say(dm, "lost by the gateway", INVALIDATED, deliver=False)
    await fake.wait_ready(identifies + resumes + 1)
    await fake.wait_for_reply(dm, "echo: lost by the gateway")
    assert sessions(fake) == (identifies + 1, resumes)
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


@SHARED
async def test_the_time_since_discord_last_delivered_is_exported(env: Env) -> None:
    fake, port = env.fake, env.port
    dm = fake.dm_channel(EXPORTED).id
    fake.dm("hello", EXPORTED)
    await fake.wait_for_reply(dm, "echo: hello")
    health = json.loads(await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz"))
    assert "discord" in health["platforms_last_event_seconds"], health
    assert health["platforms_last_event_seconds"]["discord"] >= 0
    metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
    assert ('picobridge_platform_last_event_age_seconds{bot="default",platform="discord"}'
            in metrics)
