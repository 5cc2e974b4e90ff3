"""Discord end to end: guild channels answer mentions and replies only, threads are sessions
of their own, and the bridge's commands work as slash commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from picobridge.agent.protocols.prime_rpc import PrimeRpcDriver
from picobridge.contract import listed_commands
from tests.e2e.discord_support import discord_config, online
from tests.e2e.prime_rpc_support import fake_agent_settings
from tests.fakes.discord import DEFAULT_USER, OTHER_USER, STRANGER, FakeDiscord
from tests.harness import AgentJournal, Daemon


async def test_a_guild_channel_answers_only_mentions_and_replies(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        _, (general,) = fake.add_guild()
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            fake.say(general, "just chatting, not for the bot")
            fake.say(general, "first question", mention=True)
            answer = await fake.wait_for_reply(general, "first question")
            # The mention goes, the speaker's name comes (the channel shares one session).
            assert answer.content == "echo: alice: first question"
            fake.say(general, "a reply to the bot", OTHER_USER, reply_to=answer.id)
            await fake.wait_for_reply(general, "echo: bob: a reply to the bot")
            fake.say(general, "chatter after it")
            fake.say(general, "last one", mention=True)
            await fake.wait_for_reply(general, "echo: alice: last one")
        contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert contents == ["alice: first question", "bob: a reply to the bot",
                            "alice: last one"]


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


async def test_threads_are_conversations_of_their_own(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        _, (general,) = fake.add_guild()
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            one = fake.open_thread(general, "one")
            two = fake.open_thread(general, "two")
            fake.say(one, "in thread one", mention=True)
            await fake.wait_for_reply(one, "echo: in thread one")
            # Once the bot talks in a thread, the thread needs no mention.
            fake.say(one, "no mention needed now")
            await fake.wait_for_reply(one, "echo: no mention needed now")
            fake.say(two, "thread two, unmentioned")
            fake.say(two, "thread two", mention=True)
            await fake.wait_for_reply(two, "echo: thread two")
        assert fake.messages_in(general) == []
        messages = AgentJournal(tmp_path / "agent").messages()
        sessions = {m["content"]: m["session"] for m in messages}
        assert set(sessions) == {"in thread one", "no mention needed now", "thread two"}
        assert sessions["in thread one"] == sessions["no mention needed now"]
        assert sessions["thread two"] != sessions["in thread one"]
        assert sessions["thread two"].startswith(f"discord.{general}.{two}.")


async def test_slash_commands_are_answered_within_the_deadline_to_their_user_only(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("remember me")
            await fake.wait_for_reply(dm, "echo: remember me")
            status = fake.slash("status", dm)
            answer = await fake.wait_for_reply(dm, "Agent:")
            assert answer.via_interaction
            new = fake.slash("new", dm)
            await fake.wait_for_reply(dm, "Started a new conversation")
            stranger_dm = fake.dm_channel(STRANGER).id
            fake.slash("help", stranger_dm, STRANGER)
            refused = await fake.wait_for_reply(stranger_dm, "picobridge access allow")
            assert refused.via_interaction
            # What follows a command comes in its option.
            fake.slash("agent", dm, text="default")
            await fake.wait_for_reply(dm, "already talks to the agent default")
            fake.dm("after new")
            await fake.wait_for_reply(dm, "echo: after new")
        for interaction in (status, new):
            # Deferred at once, ephemeral: only the person who ran it sees the answer.
            assert not interaction.late
            assert interaction.callbacks == [{"type": 5, "data": {"flags": 64}}]
        sessions = [m["session"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert len(sessions) == 2 and sessions[0] != sessions[1]


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
