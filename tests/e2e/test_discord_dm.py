"""Discord end to end: `picobridge run` against the fake Discord and the fake agent, in DMs."""

from __future__ import annotations

from pathlib import Path

from picobridge.contract import listed_commands
from tests.e2e.discord_support import assert_no_token, discord_config, online
from tests.fakes.discord import DEFAULT_USER, STRANGER, FakeDiscord
from tests.harness import AgentJournal, Daemon


async def test_dm_round_trip(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            sent = fake.dm("hello **there** #slow=1")
            reply = await fake.wait_for_reply(dm, "echo: hello")
            # Markdown kept as Discord renders it, quoting the person's message.
            assert reply.content == "echo: hello **there** #slow=1"
            assert reply.reference == sent["id"]
            # Received once stored, done when the turn ended; typing while it ran.
            await fake.wait_for(lambda: any(r.emoji == "✅" and r.added for r in fake.reactions),
                                "the done reaction")
            emojis = [(r.emoji, r.added) for r in fake.reactions if r.message_id == sent["id"]]
            assert emojis[0] == ("👀", True) and ("✅", True) in emojis
            assert any(channel == dm for channel, _ in fake.typing)
            # Slash commands registered once, globally.
            assert [c["name"] for c in fake.commands["global"]] == [
                c.name for c in listed_commands()]
        assert daemon.returncode == 0
        assert_no_token(daemon, fake)
        messages = AgentJournal(tmp_path / "agent").messages()
        assert [m["content"] for m in messages] == ["hello **there** #slow=1"]
        assert messages[0]["session"].startswith(f"discord.{dm}")


async def test_a_stranger_is_told_how_to_get_in(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            fake.dm("let me in", user=STRANGER)
            dm = fake.dm_channel(STRANGER).id
            notice = await fake.wait_for_reply(dm, "picobridge access allow")
            assert f"discord:{STRANGER}" in notice.content
        assert AgentJournal(tmp_path / "agent").messages() == []


async def test_an_edit_of_a_waiting_message_reaches_the_agent(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with Daemon(discord_config(tmp_path, fake)) as daemon:
            await online(daemon, fake)
            dm = fake.dm_channel(DEFAULT_USER).id
            fake.dm("first #slow=3")
            await fake.wait_for(lambda: fake.typing, "the first turn running")
            waiting = fake.dm("secnd")
            fake.edit(dm, waiting["id"], "second, edited")
            await daemon.wait_for_log(r"queued Discord message \d+ updated by an edit")
            await fake.wait_for_reply(dm, "second, edited")
        contents = [m["content"] for m in AgentJournal(tmp_path / "agent").messages()]
        assert contents == ["first #slow=3", "second, edited"]
