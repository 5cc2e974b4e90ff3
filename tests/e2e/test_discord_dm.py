"""Discord end to end: `picobridge run` against the fake Discord and the fake agent, in DMs.

One daemon serves the module; every test talks as its own people, in their own DMs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from picobridge.contract import listed_commands
from tests.e2e.discord_support import (
    add_people,
    agent_messages,
    assert_no_token,
    discord_config,
    online,
)
from tests.fakes.discord import FakeDiscord
from tests.harness import Daemon

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("discord_dm")]

ROUND_TRIP, EDITOR = "400000000000000101", "400000000000000102"
STRANGER = "400000000000000199"  # not allowed


@dataclass
class Env:
    fake: FakeDiscord
    daemon: Daemon
    agent: Path  # the fake agent's state


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("discord-dm")
    async with FakeDiscord() as fake:
        add_people(fake, {ROUND_TRIP: "alice", EDITOR: "erin", STRANGER: "mallory"})
        daemon = Daemon(discord_config(tmp, fake, allowed_users=[ROUND_TRIP, EDITOR]))
        async with daemon:
            await online(daemon, fake)
            yield Env(fake, daemon, tmp / "agent")
        assert daemon.returncode == 0
        assert_no_token(daemon, fake)
        assert "Traceback" not in daemon.log


async def test_dm_round_trip(env: Env) -> None:
    fake = env.fake
    dm = fake.dm_channel(ROUND_TRIP).id
    sent = fake.dm("hello **there** #slow=1", ROUND_TRIP)
    reply = await fake.wait_for_reply(dm, "echo: hello")
    # Markdown kept as Discord renders it, quoting the person's message.
    assert reply.content == "echo: hello **there** #slow=1"
    assert reply.reference == sent["id"]
    # Received once stored, done when the turn ended; typing while it ran.
    await fake.wait_for(lambda: any(r.emoji == "✅" and r.added and r.message_id == sent["id"]
                                    for r in fake.reactions), "the done reaction")
    emojis = [(r.emoji, r.added) for r in fake.reactions if r.message_id == sent["id"]]
    assert emojis[0] == ("👀", True) and ("✅", True) in emojis
    assert any(channel == dm for channel, _ in fake.typing)
    # Slash commands registered once, globally.
    assert [c["name"] for c in fake.commands["global"]] == [c.name for c in listed_commands()]
    # (That the daemon then stops cleanly, exit code 0, the module's fixture checks.)
    messages = agent_messages(env.agent, dm)
    assert [m["content"] for m in messages] == ["hello **there** #slow=1"]


async def test_a_stranger_is_told_how_to_get_in(env: Env) -> None:
    fake = env.fake
    fake.dm("let me in", user=STRANGER)
    dm = fake.dm_channel(STRANGER).id
    notice = await fake.wait_for_reply(dm, "picobridge access allow")
    assert f"discord:{STRANGER}" in notice.content
    assert agent_messages(env.agent, dm) == []


async def test_an_edit_of_a_waiting_message_reaches_the_agent(env: Env) -> None:
    fake, daemon = env.fake, env.daemon
    dm = fake.dm_channel(EDITOR).id
    fake.dm("first #slow=3", EDITOR)
    await fake.wait_for(lambda: any(channel == dm for channel, _ in fake.typing),
                        "the first turn running")
    waiting = fake.dm("secnd", EDITOR)
    fake.edit(dm, waiting["id"], "second, edited")
    await daemon.wait_for_log(rf"queued Discord message {waiting['id']} updated by an edit")
    await fake.wait_for_reply(dm, "second, edited")
    contents = [m["content"] for m in agent_messages(env.agent, dm)]
    assert contents == ["first #slow=3", "second, edited"]
