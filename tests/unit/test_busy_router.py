"""Busy modes in the router (bridge/core/busy.py) with a scripted agent: whoever takes a message
out of the turn's pending set owns it, so each is answered once or asked again."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from picobridge.agent.port import (
    Capabilities,
    ControlFailed,
    ControlKind,
    ControlRequest,
    ControlResult,
    Reply,
)
from picobridge.contract import ChatRef, InboundMessage
from picobridge.core.modes import BusyMode, BusyModes
from picobridge.core.outbox import Outbox
from picobridge.core.router import Router
from picobridge.store import Store, StoredMessage
from tests.unit.test_router import Recorder, ScriptedAgent

STEERS = Capabilities("scripted", frozenset(), frozenset(ControlKind), can_abort=True,
                      keeps_aborted=True)


@dataclass(eq=False)
class SteerableAgent(ScriptedAgent):
    refuse: bool = False
    controls: list[ControlRequest] = field(default_factory=list)
    controlled: asyncio.Event = field(default_factory=asyncio.Event)

    async def control(self, request: ControlRequest) -> ControlResult:
        self.controls.append(request)
        self.controlled.set()
        if self.refuse:
            raise ControlFailed("no turn of this conversation runs")
        return ControlResult()


@dataclass
class Rig:
    store: Store
    router: Router
    agent: SteerableAgent
    adapter: Recorder
    n: int = 0

    async def say(self, text: str) -> None:
        await self.router.arrive(await self.stored(text))

    async def stored(self, text: str) -> StoredMessage:
        self.n += 1
        stored = await self.store.record_inbound(InboundMessage(
            chat=ChatRef("test", "c"), sender_id="u", text=text,
            platform_message_id=f"m{self.n}"))
        assert stored is not None
        return stored


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    store = await Store.open(tmp_path / "b.db")
    adapter = Recorder()
    outbox = Outbox(store, {"test": adapter})
    agent = SteerableAgent()
    router = Router(store, outbox, {"test": adapter}, agent, turn_timeout=60, max_attempts=3,
                    coalesce=True)
    router.busy_modes = BusyModes(store, "steer", lambda _agent: STEERS)
    await router.start()
    agent.ready = True
    await router.worker_ready(agent)
    yield Rig(store, router, agent, adapter)
    await router.stop(0)
    await outbox.stop(0)
    await store.close()


async def sent_into(rig: Rig) -> ControlRequest:
    # The message goes into the turn from a task of its own.
    await asyncio.wait_for(rig.agent.controlled.wait(), 5)
    rig.agent.controlled.clear()
    return rig.agent.controls[-1]


async def test_a_steered_message_is_answered_by_the_turns_one_answer(rig: Rig) -> None:
    await rig.say("first")
    turn = await rig.agent.next()
    await rig.say("steer me")
    steer = await sent_into(rig)
    assert (steer.kind, steer.argument) == (ControlKind.STEER, "steer me")
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "both",
                                                     delivered=(steer.tag,)))
    await rig.adapter.wait_sent(2)  # the note and the answer
    assert await rig.store.open_messages() == []
    assert rig.agent.requests.empty()  # nothing asked again


async def test_a_message_the_agent_never_took_is_asked_again_on_its_own(rig: Rig) -> None:
    await rig.say("first")
    turn = await rig.agent.next()
    await rig.say("too late")
    steer = await sent_into(rig)
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "first answer",
                                                     undelivered=(steer.tag,)))
    again = await rig.agent.next()
    assert again.text == "too late"


async def test_a_refused_steer_waits_for_the_next_turn(rig: Rig) -> None:
    rig.agent.refuse = True
    await rig.say("first")
    turn = await rig.agent.next()
    await rig.say("second")
    await sent_into(rig)
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "first answer"))
    assert (await rig.agent.next()).text == "second"
    # Never taken into the turn, it was not charged an attempt there: only this one.
    assert [(m.text, m.attempts) for m in await rig.store.open_messages()] == [("second", 1)]


async def test_a_follow_up_gets_its_own_answer_in_the_same_turn(rig: Rig) -> None:
    rig.router.busy_modes = BusyModes(rig.store, "followup", lambda _agent: STEERS)
    await rig.say("first")
    turn = await rig.agent.next()
    await rig.say("then this")
    follow = await sent_into(rig)
    assert follow.kind is ControlKind.FOLLOW_UP
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "answer one",
                                                     continues=follow.tag))
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "answer two"))
    await rig.adapter.wait_sent(3)
    texts = [r.text for _, r in rig.adapter.sent]
    assert texts.index("answer one") < texts.index("answer two")
    assert await rig.store.open_messages() == []


async def test_an_interrupt_stops_the_turn_and_sends_only_the_new_message(rig: Rig) -> None:
    rig.router.busy_modes = BusyModes(rig.store, "interrupt", lambda _agent: STEERS)
    rig.agent.can_abort = True
    await rig.say("long job")
    turn = await rig.agent.next()
    await rig.say("never mind")
    assert rig.agent.cancelled and rig.agent.cancelled[0][0] == turn.session
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "half", stopped=True))
    again = await rig.agent.next()
    assert again.text == "never mind"  # the agent keeps "long job" in its history
    await rig.router.agent_event(rig.agent, Reply.of(again.session, "ok"))
    await rig.adapter.wait_sent(2)
    assert "half" not in [r.text for _, r in rig.adapter.sent]
    assert await rig.store.open_messages() == []


async def test_a_steered_message_is_charged_an_attempt_like_a_turns_own(rig: Rig) -> None:
    await rig.say("first")
    await rig.agent.next()
    await rig.say("steer me")
    await sent_into(rig)
    # Written as dispatched, one attempt, beside the turn's own message.
    await rig.router._recorded()
    assert {m.text: (m.status, m.attempts) for m in await rig.store.open_messages()} == {
        "first": ("dispatched", 1), "steer me": ("dispatched", 1)}
    # The agent dies on it: both are asked again, together, each on its second attempt...
    for attempt in (2, 3):
        rig.agent.ready = False
        await rig.router.worker_lost(rig.agent, "crash")
        rig.agent.ready = True
        await rig.router.worker_ready(rig.agent)
        again = await rig.agent.next()
        assert again.text == "first\n\nsteer me"
        attempts = {m.text: m.attempts for m in await rig.store.open_messages()}
        assert attempts == {"first": attempt, "steer me": attempt}
    # ... and after bridge.max_attempts both have failed and their sender is told.
    rig.agent.ready = False
    await rig.router.worker_lost(rig.agent, "crash")
    await rig.adapter.wait_sent(2)  # the steer's note and the failure
    assert await rig.store.open_messages() == []


class UnreadableModes(BusyModes):
    """A store that cannot say which mode the chat chose (the first look after a start)."""

    async def of(self, chat: ChatRef) -> BusyMode:
        raise sqlite3.OperationalError("disk I/O error")


async def test_a_message_whose_chat_mode_cannot_be_read_still_waits_its_turn(rig: Rig) -> None:
    """Its arrival runs in a task nobody awaits: had it raised there, the message would have
    sat in the store, unanswered, until the next start, and then been answered after the
    chat's later messages."""
    rig.router.busy_modes = UnreadableModes(rig.store, "steer", lambda _agent: STEERS)
    await rig.say("first")
    turn = await rig.agent.next()
    await rig.say("second")  # the turn runs: the mode decides, and cannot be read
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "first answer"))
    assert (await rig.agent.next()).text == "second"
    assert rig.agent.controls == []


async def test_a_message_is_not_queued_before_one_whose_mode_is_still_read(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    modes = rig.router.busy_modes
    assert modes is not None
    reading, read, original = asyncio.Event(), asyncio.Event(), modes.of

    async def slow_read(chat: ChatRef) -> BusyMode:
        reading.set()
        await read.wait()  # the store is slow to say the chat's mode
        return await original(chat)

    monkeypatch.setattr(modes, "of", slow_read)
    await rig.say("first")
    turn = await rig.agent.next()
    rig.router.arrive_soon(await rig.stored("second"))  # into the running turn: mode read
    await asyncio.wait_for(reading.wait(), 5)
    await rig.router.agent_event(rig.agent, Reply.of(turn.session, "first answer"))
    rig.router.arrive_soon(await rig.stored("third"))  # no turn runs any more
    read.set()
    text = (await rig.agent.next()).text
    assert text.startswith("second"), text
