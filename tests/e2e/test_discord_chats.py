"""Discord end to end: guild channels answer mentions and replies only, threads are sessions
of their own, and the bridge's commands work as slash commands.

One daemon serves the tests that need no config of their own (every one talks as its own
people, in its own channel or DM); those about a guild policy or the commands routes offer
start their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from picobridge.agent.protocols.prime_rpc import PrimeRpcDriver
from picobridge.contract import listed_commands
from tests.e2e.discord_support import (
    add_people,
    agent_messages,
    assert_no_token,
    discord_config,
    online,
)
from tests.e2e.prime_rpc_support import fake_agent_settings
from tests.fakes.discord import DEFAULT_USER, STRANGER, FakeDiscord
from tests.harness import AgentJournal, Daemon

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("discord_chats")]

# The shared daemon's people: a pair per test (names are what the agent is told).
ALICE, BOB = "400000000000000111", "400000000000000112"
THREADER, SLASHER = "400000000000000113", "400000000000000114"


@dataclass
class Env:
    fake: FakeDiscord
    daemon: Daemon
    agent: Path  # the fake agent's state
    general: str  # the guild channel of the mentions test
    threads: str  # the guild channel the threads test opens its threads in


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("discord-chats")
    async with FakeDiscord() as fake:
        add_people(fake, {ALICE: "alice", BOB: "bob", THREADER: "tom", SLASHER: "sam"})
        # Guilds come with READY: added before the daemon connects.
        _, (general, threads) = fake.add_guild(channels=("general", "threads"))
        config = discord_config(tmp, fake, allowed_users=[ALICE, BOB, THREADER, SLASHER])
        daemon = Daemon(config)
        async with daemon:
            await online(daemon, fake)
            yield Env(fake, daemon, tmp / "agent", general, threads)
        assert_no_token(daemon, fake)
        assert "Traceback" not in daemon.log


async def test_a_guild_channel_answers_only_mentions_and_replies(env: Env) -> None:
    fake, general = env.fake, env.general
    fake.say(general, "just chatting, not for the bot", ALICE)
    fake.say(general, "first question", ALICE, mention=True)
    answer = await fake.wait_for_reply(general, "first question")
    # The mention goes, the speaker's name comes (the channel shares one session).
    assert answer.content == "echo: alice: first question"
    fake.say(general, "a reply to the bot", BOB, reply_to=answer.id)
    await fake.wait_for_reply(general, "echo: bob: a reply to the bot")
    fake.say(general, "chatter after it", ALICE)
    fake.say(general, "last one", ALICE, mention=True)
    await fake.wait_for_reply(general, "echo: alice: last one")
    contents = [m["content"] for m in agent_messages(env.agent, general)]
    assert contents == ["alice: first question", "bob: a reply to the bot", "alice: last one"]


async def test_threads_are_conversations_of_their_own(env: Env) -> None:
    fake, general = env.fake, env.threads
    one = fake.open_thread(general, "one", THREADER)
    two = fake.open_thread(general, "two", THREADER)
    fake.say(one, "in thread one", THREADER, mention=True)
    await fake.wait_for_reply(one, "echo: in thread one")
    # Once the bot talks in a thread, the thread needs no mention.
    fake.say(one, "no mention needed now", THREADER)
    await fake.wait_for_reply(one, "echo: no mention needed now")
    fake.say(two, "thread two, unmentioned", THREADER)
    fake.say(two, "thread two", THREADER, mention=True)
    await fake.wait_for_reply(two, "echo: thread two")
    assert fake.messages_in(general) == []
    messages = agent_messages(env.agent, general)
    sessions = {m["content"]: m["session"] for m in messages}
    assert set(sessions) == {"in thread one", "no mention needed now", "thread two"}
    assert sessions["in thread one"] == sessions["no mention needed now"]
    assert sessions["thread two"] != sessions["in thread one"]
    assert sessions["thread two"].startswith(f"discord.{general}.{two}.")


async def test_slash_commands_are_answered_within_the_deadline_to_their_user_only(
        env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(SLASHER).id
    fake.dm("remember me", SLASHER)
    await fake.wait_for_reply(dm, "echo: remember me")
    status = fake.slash("status", dm, SLASHER)
    answer = await fake.wait_for_reply(dm, "Agent:")
    assert answer.via_interaction
    new = fake.slash("new", dm, SLASHER)
    await fake.wait_for_reply(dm, "Started a new conversation")
    stranger_dm = fake.dm_channel(STRANGER).id
    fake.slash("help", stranger_dm, STRANGER)
    refused = await fake.wait_for_reply(stranger_dm, "picobridge access allow")
    assert refused.via_interaction
    # What follows a command comes in its option.
    fake.slash("agent", dm, SLASHER, text="default")
    await fake.wait_for_reply(dm, "already talks to the agent default")
    fake.dm("after new", SLASHER)
    await fake.wait_for_reply(dm, "echo: after new")
    for interaction in (status, new):
        # Deferred at once, ephemeral: only the person who ran it sees the answer.
        assert not interaction.late
        assert interaction.callbacks == [{"type": 5, "data": {"flags": 64}}]
    sessions = [m["session"] for m in agent_messages(env.agent, dm)]
    assert len(sessions) == 2 and sessions[0] != sessions[1]


# The tests from here on start a daemon of their own: their configs are what they test.


async def test_guilds_outside_the_policy_are_not_answered(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        served, (here,) = fake.add_guild("served")
        _, (elsewhere,) = fake.add_guild("other")
        async with Daemon(discord_config(tmp_path, fake, guilds=[served])) as daemon:
            await online(daemon, fake)
            fake.say(elsewhere, "hello from elsewhere", mention=True)
            fake.say(here, "hello from here", mention=True)
            await fake.wait_for_reply(here, "echo: alice: hello from here")
            # Slash commands registered in the served guild (and DMs', globally).
            assert [c["name"] for c in fake.commands[served]] == [
                c.name for c in listed_commands()]
        assert fake.messages_in(elsewhere) == []
        contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert contents == ["alice: hello from here"]


async def test_the_slash_commands_hold_what_the_agent_offers(tmp_path: Path) -> None:
    # prime-rpc's driver declares /model, /think, /compact and /export: Discord offers them
    # beside the bridge's own, as Telegram's menu does, in the guilds and in DMs.
    offered = [c.name for c in listed_commands(PrimeRpcDriver.commands)]
    assert {"model", "think", "compact", "export"} <= set(offered)
    async with FakeDiscord() as fake:
        served, _ = fake.add_guild("served")
        config = discord_config(tmp_path, fake, agent=fake_agent_settings(tmp_path),
                                guilds=[served])
        async with Daemon(config) as daemon:
            # Signed in only once the commands are registered.
            await online(daemon, fake)
            assert [c["name"] for c in fake.commands[served]] == offered
            assert [c["name"] for c in fake.commands["global"]] == offered


def two_agents(tmp: Path, fake: FakeDiscord, routes: list[dict[str, Any]],
               **discord: Any) -> Path:
    return discord_config(tmp, fake, sections={
        "agents": {"coder": fake_agent_settings(tmp)}, "routes": routes}, **discord)


async def test_slash_commands_are_what_the_routes_reach_per_kind_of_chat(
        tmp_path: Path) -> None:
    # Discord keeps slash commands per guild and context, not per channel: with the guilds
    # listed, guild channels (routed to the prime-rpc coder) offer /model, DMs (the picobot
    # default) do not.
    family = [c.name for c in listed_commands()]
    coder = [c.name for c in listed_commands(PrimeRpcDriver.commands)]
    async with FakeDiscord() as fake:
        served, _ = fake.add_guild("served")
        config = two_agents(tmp_path, fake, [{"agent": "coder", "kind": "group"}],
                            guilds=[served])
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            assert [c["name"] for c in fake.commands[served]] == coder
            assert [c["name"] for c in fake.commands["global"]] == family


async def test_a_command_only_another_reachable_agent_offers_is_answered_so(
        tmp_path: Path) -> None:
    # Registered globally, the commands are the union of what the routes reach: /model is
    # there for the coder's channel, and a DM on the picobot default hears it is not offered.
    coder = [c.name for c in listed_commands(PrimeRpcDriver.commands)]
    async with FakeDiscord() as fake:
        _, (dev,) = fake.add_guild("dev")
        config = two_agents(tmp_path, fake, [{"agent": "coder", "chats": [f"discord:{dev}"]}])
        async with Daemon(config) as daemon:
            await online(daemon, fake)
            assert [c["name"] for c in fake.commands["global"]] == coder
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.slash("model", dm)
            answer = await fake.wait_for_reply(dm, "/model is not available with this agent")
            assert answer.via_interaction
