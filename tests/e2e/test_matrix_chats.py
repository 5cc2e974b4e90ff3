"""Matrix against a real Synapse: direct chats, invitations, rooms with mentions, threads."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.matrix_support import (
    assert_no_secrets,
    body,
    matrix_config,
    person,
    synapse,
    synced,
)
from tests.harness import Daemon
from tests.synapse.server import Synapse

__all__ = ["synapse"]


async def test_a_direct_chat_round_trip(tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    alice = synapse.register()
    config = matrix_config(tmp_path, synapse, bot, [alice.user_id])
    async with Daemon(config) as daemon, person(synapse, alice) as me:
        await synced(daemon)
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        asked = await me.say(room, "hello there")
        answer = await me.wait_for_message(room, bot.user_id, lambda e: "echo" in body(e))
        assert body(answer) == "echo: hello there"
        # A direct chat needs no quote; the answer is marked done on the question.
        assert "m.relates_to" not in answer["content"]
        reaction = await me.wait_until(lambda: next(
            (e for e in me.from_bot(room, bot.user_id) if e["type"] == "m.reaction"), None),
            what="the done reaction")
        assert reaction["content"]["m.relates_to"]["event_id"] == asked
    assert_no_secrets(daemon, bot, alice)
