"""Matrix against a real Synapse: direct chats, invitations, rooms with mentions, threads.

One daemon (one bot) serves the module's tests but two: every test talks as its own people, in
rooms it makes. Signing in with a password (a device kept over restarts) and a question of a
prime-rpc agent (another agent) start their own.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.matrix_support import (
    Shared,
    assert_no_secrets,
    body,
    matrix_config,
    person,
    shared_daemon,
    synced,
)
from tests.harness import Daemon, http_port, run_cli
from tests.synapse.person import Person
from tests.synapse.server import Synapse

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("matrix_chats")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory,
              synapse: Synapse) -> AsyncIterator[Shared]:
    roles = ["direct", "inviter", "room_alice", "room_bob", "room_owner", "editor",
             "commander"]
    # Not coalescing (the edit test's): the others send one message at a time.
    async with shared_daemon(tmp_path_factory.mktemp("matrix-chats"), synapse, roles,
                             sections={"http": {"listen": "127.0.0.1:0"},
                                       "bridge": {"coalesce": False}}) as shared:
        yield shared


async def test_a_direct_chat_round_trip(env: Shared) -> None:
    synapse, bot, daemon = env.server, env.bot, env.daemon
    async with person(synapse, env.people["direct"]) as me:
        port = await http_port(daemon)
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        asked = await me.say(room, "hello there #slow=1")
        await me.wait_until(lambda: bot.user_id in me.typing, what="the bot typing")
        answer = await me.wait_for_message(room, bot.user_id, lambda e: "echo" in body(e))
        assert body(answer) == "echo: hello there #slow=1"
        # A direct chat needs no quote; the answer is marked done on the question.
        assert "m.relates_to" not in answer["content"]
        reaction = await me.wait_until(lambda: next(
            (e for e in me.from_bot(room, bot.user_id) if e["type"] == "m.reaction"), None),
            what="the done reaction")
        assert reaction["content"]["m.relates_to"]["event_id"] == asked
        # Every completed sync counts as hearing from the homeserver (inbound liveness).
        health = json.loads(await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz"))
        assert health["platforms_last_event_seconds"]["matrix"] >= 0, health


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


async def room_with(synapse: Synapse, owner: Person, bot: str, *others: Person) -> str:
    """A room of more than two: `owner`, the bot and `others`, everyone joined."""
    room = await owner.create_room([bot, *(o.user_id for o in others)], name="team")
    for other in others:
        await other.wait_until(functools.partial(list.__contains__, other.invites, room),
                               what="the invitation")
        await other.join(room)
    await owner.wait_joined(room, bot)
    for other in others:
        await owner.wait_joined(room, other.user_id)
    return room


async def test_an_invitation_from_a_stranger_is_declined(env: Shared) -> None:
    synapse, bot, daemon = env.server, env.bot, env.daemon
    async with person(synapse) as stranger:
        room = await stranger.create_room([bot.user_id], direct=True)
        await daemon.wait_for_log(rf"declined the invitation to {re.escape(room)}")

        def left() -> bool:
            return any(e.get("type") == "m.room.member" and e.get("state_key") == bot.user_id
                       and e["content"].get("membership") == "leave"
                       for e in stranger.events.get(room, []))

        await stranger.wait_until(left, what="the bot to decline")
        assert not stranger.messages_from(room, bot.user_id)


async def test_a_room_hears_mentions_with_context_and_threads_are_sessions(
        env: Shared) -> None:
    synapse, bot = env.server, env.bot
    async with person(synapse, env.people["room_alice"]) as alice, \
            person(synapse, env.people["room_bob"]) as bob:
        room = await room_with(synapse, alice, bot.user_id, bob)
        await bob.say(room, "the build is red since noon")
        await alice.say(room, "anyone looking at it?")  # not for the bot: no mention
        name = bot.user_id[1:].split(":")[0]
        asked = await alice.say(room, f"{name}: what do you make of this?",
                                **{"m.mentions": {"user_ids": [bot.user_id]}})
        answer = await alice.wait_for_message(room, bot.user_id,
                                              lambda e: "make of this" in body(e))
        text = body(answer)
        # The room's earlier messages went along as context, the mention itself did not.
        assert "the build is red since noon" in text and "anyone looking at it?" in text
        assert f"{name}:" not in text.split("The message for you:")[-1]
        assert answer["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}
        assert len(alice.messages_from(room, bot.user_id)) == 1
        # A reply to the bot's message needs no mention; a reply to someone else's does.
        await alice.say(room, "and bob's?", **{"m.relates_to": {"m.in_reply_to": {
            "event_id": next(e["event_id"] for e in alice.events[room]
                             if body(e) == "anyone looking at it?")}}})
        await alice.say(room, "> <bot> earlier\n\nand then?", **{"m.relates_to": {
            "m.in_reply_to": {"event_id": answer["event_id"]}}})
        follow = await alice.wait_for_message(room, bot.user_id,
                                              lambda e: "and then?" in body(e))
        assert "and bob's?" not in body(follow)
        assert not any("and bob's?" in body(e) for e in alice.messages_from(room, bot.user_id))

        # A thread under bob's message is a conversation of its own.
        root = next(e["event_id"] for e in alice.events[room]
                    if body(e) == "the build is red since noon")
        thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": root,
                                   "is_falling_back": True,
                                   "m.in_reply_to": {"event_id": root}}}
        await bob.say(room, f"{name} remember: blue", **thread,
                      **{"m.mentions": {"user_ids": [bot.user_id]}})
        first = await bob.wait_for_message(room, bot.user_id, lambda e: "blue" in body(e))
        assert first["content"]["m.relates_to"]["rel_type"] == "m.thread"
        assert first["content"]["m.relates_to"]["event_id"] == root
        # Known thread: no mention needed; its memory is the thread's, not the room's.
        await bob.say(room, "what did I just say?", **thread)
        recall = await bob.wait_for_message(room, bot.user_id,
                                            lambda e: body(e).startswith("You said"))
        assert "remember: blue" in body(recall) and "make of this" not in body(recall)
        assert recall["content"]["m.relates_to"]["event_id"] == root


async def test_a_stranger_in_a_room_hears_how_to_be_let_in(env: Shared) -> None:
    synapse, bot, config = env.server, env.bot, env.config
    # bob: not allowed until the test lets him in.
    async with person(synapse, env.people["room_owner"]) as alice, person(synapse) as bob:
        room = await room_with(synapse, alice, bot.user_id, bob)
        mention = {"m.mentions": {"user_ids": [bot.user_id]}}
        await bob.say(room, "let me in", **mention)
        refusal = await bob.wait_for_message(room, bot.user_id)
        assert f"picobridge access allow matrix:{bob.user_id}" in body(refusal)
        code, _, err = await run_cli("access", "allow", f"matrix:{bob.user_id}",
                                     "--config", str(config))
        assert code == 0, err
        await bob.say(room, "now?", **mention)
        answer = await bob.wait_for_message(room, bot.user_id, lambda e: "echo" in body(e))
        assert body(answer) == "echo: now?"


async def test_an_edit_updates_a_queued_message(env: Shared) -> None:
    synapse, bot, daemon = env.server, env.bot, env.daemon
    async with person(synapse, env.people["editor"]) as me:
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        await me.say(room, "first #slow=3")
        second = await me.say(room, "secnd")
        await daemon.wait_for_log(rf"matrix event {re.escape(second)} -> accepted")
        await me.send(room, {"msgtype": "m.text", "body": "* second",
                             "m.new_content": {"msgtype": "m.text", "body": "second"},
                             "m.relates_to": {"rel_type": "m.replace", "event_id": second}})
        await daemon.wait_for_log(rf"queued message {re.escape(second)} updated by an edit")
        answer = await me.wait_for_message(room, bot.user_id, lambda e: "echo: sec" in body(e))
        assert body(answer) == "echo: second"


async def test_commands_work_with_the_prefix(env: Shared) -> None:
    synapse, bot = env.server, env.bot
    async with person(synapse, env.people["commander"]) as me:
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        await me.say(room, "remember this")
        await me.wait_for_message(room, bot.user_id, lambda e: "remember" in body(e))
        await me.say(room, "!new")
        await me.wait_for_message(room, bot.user_id, lambda e: "fresh" in body(e).lower()
                                  or "new" in body(e).lower())
        await me.say(room, "what did I just say?")
        recall = await me.wait_for_message(room, bot.user_id,
                                           lambda e: "said anything" in body(e))
        assert body(recall) == "You have not said anything yet."
        await me.say(room, "/help")
        help_text = await me.wait_for_message(room, bot.user_id, lambda e: "/status" in body(e))
        assert help_text["content"]["msgtype"] == "m.notice"


# From here on: no daemon, or one of the test's own (its config is what it tests).


async def test_check_signs_in_and_reports(tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    config = matrix_config(tmp_path, synapse, bot, [])
    code, out, err = await run_cli("check", "--config", str(config))
    assert code == 0, out + err
    assert f"signed in as {bot.user_id}" in out
    wrong = matrix_config(tmp_path, synapse, bot, [], access_token="syt_not_a_real_token_123")
    code, out, err = await run_cli("check", "--config", str(wrong))
    assert code != 0
    assert "M_UNKNOWN_TOKEN" in out + err
    for text in (out, err):
        assert bot.access_token not in text and "syt_not_a_real_token_123" not in text


async def test_a_password_login_keeps_its_device(tmp_path: Path, synapse: Synapse) -> None:
    bot = synapse.register()
    alice = synapse.register()
    config = matrix_config(tmp_path, synapse, bot, [alice.user_id], access_token=None,
                           password=bot.password)
    devices = []
    for _ in range(2):
        async with Daemon(config) as daemon:
            line = await daemon.wait_for_log(r"signed in to Matrix as .* \(device \w+\)")
            devices.append(line.rsplit("device ", 1)[1])
        assert_no_secrets(daemon, bot)
    assert devices[0] == devices[1] and devices[0] != bot.device_id
    stored = tmp_path / "state" / "matrix" / "session.json"
    assert stored.stat().st_mode & 0o077 == 0


async def test_a_question_of_the_agent_is_answered_by_number(tmp_path: Path,
                                                             synapse: Synapse) -> None:
    bot, alice = synapse.register(), synapse.register()
    agent = {"protocol": "prime-rpc",
             "command": [sys.executable, str(Path(__file__).with_name("dialog_agent.py"))]}
    config = matrix_config(tmp_path, synapse, bot, [alice.user_id], agent=agent,
                           reaction_done="")
    async with Daemon(config) as daemon, person(synapse, alice) as me:
        await synced(daemon)
        room = await me.create_room([bot.user_id], direct=True)
        await me.wait_joined(room, bot.user_id)
        await me.say(room, "please select")
        question = await me.wait_for_message(room, bot.user_id,
                                             lambda e: "Which colour?" in body(e))
        assert "2. green" in body(question) or "2" in body(question)
        await me.say(room, "2")
        answer = await me.wait_for_message(room, bot.user_id, lambda e: "got:" in body(e))
        assert body(answer) == 'got: {"value": "green"}'
