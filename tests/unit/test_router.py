"""The router with a real store and outbox, a scripted agent port and a recording adapter."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from picobridge.agent.port import (
    AgentEvent,
    AgentListener,
    AgentRequest,
    Capabilities,
    ControlFailed,
    ControlRequest,
    ControlResult,
    Failure,
    Progress,
    Reply,
    WorkerInfo,
)
from picobridge.contract import (
    Adapter,
    BridgeLink,
    ChatRef,
    DialogAnswer,
    InboundMessage,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
)
from picobridge.core.access import AccessPolicy
from picobridge.core.commands import Commands
from picobridge.core.intake import AGENT_DOWN_TEXT, Intake
from picobridge.core.outbox import Outbox
from picobridge.core.router import Router
from picobridge.store import Store, StoredReply


class Recorder(Adapter):
    platform = "test"

    def __init__(self) -> None:
        self.sent: list[tuple[str, OutgoingReply]] = []
        self.progress: list[tuple[str, ProgressEvent | Outcome]] = []
        self.changed = asyncio.Condition()
        self.hold: asyncio.Event | None = None  # while set, a send waits for it
        self.entered = asyncio.Event()

    async def start(self, bridge: BridgeLink) -> None: ...

    async def stop(self) -> None: ...

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        self.sent.append((chat.chat_id, reply))
        async with self.changed:
            self.changed.notify_all()

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        self.progress.append((chat.chat_id, event))

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        self.progress.append((chat.chat_id, outcome))

    async def wait_sent(self, n: int) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: len(self.sent) >= n), 5)


NO_CAPABILITIES = Capabilities("scripted", frozenset(), frozenset())


@dataclass(eq=False)
class ScriptedAgent:
    """One scripted worker that is also its own pool."""

    max_in_flight: int = 1
    ready: bool = False
    requests: asyncio.Queue[AgentRequest] = field(default_factory=asyncio.Queue)
    restarts: list[str] = field(default_factory=list)
    restarted: asyncio.Event = field(default_factory=asyncio.Event)
    # While set, a write waits for it (an agent slow to read its input).
    hold: asyncio.Event | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    name: str = "w1"
    can_abort: bool = False
    cancelled: list[tuple[str, str]] = field(default_factory=list)
    dialog_answers: list[tuple[str, DialogAnswer]] = field(default_factory=list)

    # AgentPool
    def start(self, listener: AgentListener) -> None: ...

    async def stop(self) -> None: ...

    @property
    def workers(self) -> list[ScriptedAgent]:
        return [self]

    def place(self, session: str, busy: Mapping[str, int],
              agent: str = "default") -> ScriptedAgent | None:
        return self if self.ready and busy.get(self.name, 0) < self.max_in_flight else None

    def has_room(self, busy: Mapping[str, int], agent: str | None = None) -> bool:
        return self.ready and busy.get(self.name, 0) < self.max_in_flight

    # Worker
    async def send(self, request: AgentRequest) -> None:
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        await self.requests.put(request)

    def restart(self, reason: str) -> None:
        self.restarts.append(reason)
        self.restarted.set()

    def cancel_turn(self, session: str, reason: str) -> None:
        self.cancelled.append((session, reason))
        self.restart(reason)

    async def control(self, request: ControlRequest) -> ControlResult:
        raise ControlFailed("the scripted agent has no controls")

    async def answer_dialog(self, request_id: str, answer: DialogAnswer) -> None:
        self.dialog_answers.append((request_id, answer))

    async def next(self) -> AgentRequest:
        return await asyncio.wait_for(self.requests.get(), 5)


@dataclass
class Rig:
    store: Store
    router: Router
    agent: ScriptedAgent
    adapter: Recorder
    outbox: Outbox
    n: int = 0

    async def ready(self) -> None:
        self.agent.ready = True
        await self.router.worker_ready(self.agent)

    async def lost(self, reason: str) -> None:
        self.agent.ready = False
        await self.router.worker_lost(self.agent, reason)

    async def event(self, event: AgentEvent) -> None:
        await self.router.agent_event(self.agent, event)

    async def submit(self, chat_id: str, text: str) -> None:
        self.n += 1
        stored = await self.store.record_inbound(InboundMessage(
            chat=ChatRef("test", chat_id), sender_id="u", text=text,
            platform_message_id=f"{chat_id}-{self.n}", reply_to=f"r{self.n}"))
        assert stored is not None
        self.router.enqueue(stored)


@pytest.fixture
async def rig(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    opts = getattr(request, "param", {})
    store = await Store.open(tmp_path / "r.db")
    adapter = Recorder()
    outbox = Outbox(store, {"test": adapter})
    agent = ScriptedAgent(max_in_flight=opts.get("max_in_flight", 1))
    router = Router(store, outbox, {"test": adapter}, agent,
                    turn_timeout=opts.get("turn_timeout", 60), max_attempts=3,
                    coalesce=opts.get("coalesce", True))
    await router.start()
    yield Rig(store, router, agent, adapter, outbox)
    await router.stop(0)
    await outbox.stop(0)
    await store.close()


async def test_chats_are_served_round_robin(rig: Rig) -> None:
    await rig.submit("busy", "b0")
    await rig.ready()
    first = await rig.agent.next()
    await rig.submit("busy", "b1")
    await rig.submit("busy", "b2")
    await rig.submit("quiet", "q0")
    # The busy chat's remaining messages coalesce, but the quiet chat goes next.
    await rig.event(Reply.of(first.session, "answer b0"))
    second = await rig.agent.next()
    assert second.text == "q0"
    await rig.event(Reply.of(second.session, "answer q0"))
    third = await rig.agent.next()
    assert third.text == "b1\n\nb2"
    await rig.event(Reply.of(third.session, "answer b1 b2"))
    await rig.adapter.wait_sent(3)
    assert [(c, r.text) for c, r in rig.adapter.sent] == [
        ("busy", "answer b0"), ("quiet", "answer q0"), ("busy", "answer b1 b2")]
    assert rig.adapter.sent[2][1].answers == ("busy-2", "busy-3")
    assert first.text == "b0"


async def test_waiting_chats_are_not_asked_for_a_worker_while_none_has_room(rig: Rig) -> None:
    asked: list[str] = []
    place = rig.agent.place

    def counted(session: str, busy: Mapping[str, int], agent: str = "default"
                ) -> ScriptedAgent | None:
        asked.append(session)
        return place(session, busy, agent)

    rig.agent.place = counted  # type: ignore[method-assign]
    await rig.ready()
    await rig.submit("c0", "m0")
    first = await rig.agent.next()
    for i in range(1, 30):
        await rig.submit(f"c{i}", f"m{i}")
    # Each arrival woke the dispatcher while the one worker was busy: nobody was asked.
    assert asked == [first.session]
    await rig.event(Reply.of(first.session, "a0"))
    second = await rig.agent.next()
    assert second.text == "m1" and len(asked) == 2  # round robin: the next chat, once asked


@pytest.mark.parametrize("rig", [{"coalesce": False}], indirect=True)
async def test_without_coalescing_each_message_is_a_turn(rig: Rig) -> None:
    await rig.submit("a", "one")
    await rig.submit("a", "two")
    await rig.ready()
    first = await rig.agent.next()
    await rig.event(Reply.of(first.session, "1"))
    second = await rig.agent.next()
    assert (first.text, second.text) == ("one", "two")


@pytest.mark.parametrize("rig", [{"max_in_flight": 2}], indirect=True)
async def test_max_in_flight_bounds_turns_across_chats(rig: Rig) -> None:
    for chat in ("a", "b", "c"):
        await rig.submit(chat, chat)
    await rig.ready()
    got = {(await rig.agent.next()).text, (await rig.agent.next()).text}
    assert got == {"a", "b"} and rig.agent.requests.empty()
    assert rig.router.stats().in_flight == 2
    session_a = await rig.store.current_session(ChatRef("test", "a"))
    await rig.event(Reply.of(session_a, "done a"))
    assert (await rig.agent.next()).text == "c"


async def test_progress_and_answer_reach_the_turn_of_their_session(rig: Rig) -> None:
    await rig.submit("a", "hello")
    await rig.ready()
    request = await rig.agent.next()
    await rig.event(Progress(request.session, "text", "hel"))
    await rig.event(Progress(request.session, "tool_start", tool="ls"))
    await rig.event(Progress("another-session", "text", "not this chat's"))
    await rig.event(Reply.of(request.session, "hello back"))
    await rig.adapter.wait_sent(1)
    kinds = [e.kind if isinstance(e, ProgressEvent) else e for _, e in rig.adapter.progress]
    assert kinds == [ProgressKind.STARTED, ProgressKind.TEXT, ProgressKind.TOOL_START,
                     Outcome.DONE]
    started = rig.adapter.progress[0][1]
    assert isinstance(started, ProgressEvent) and started.message_ids == ("r1",)
    assert rig.adapter.sent[0][1].reply_to == "r1"


async def test_an_answer_from_another_worker_is_not_taken_for_the_turn(rig: Rig) -> None:
    await rig.submit("a", "hello")
    await rig.ready()
    request = await rig.agent.next()
    other = ScriptedAgent(name="w2")
    await rig.router.agent_event(other, Reply.of(request.session, "a scheduled job's answer"))
    await rig.adapter.wait_sent(1)
    assert rig.adapter.sent[0][1].kind is ReplyKind.UNSOLICITED
    assert rig.router.status(ChatRef("test", "a")).worker == "w1"  # the turn still runs
    await rig.event(Reply.of(request.session, "the answer"))
    await rig.adapter.wait_sent(2)
    assert rig.adapter.sent[1][1].kind is ReplyKind.ANSWER


async def test_response_without_turn_goes_to_the_session_chat(rig: Rig) -> None:
    await rig.submit("a", "hello")
    await rig.ready()
    req = await rig.agent.next()
    await rig.event(Reply.of(req.session, "answer"))
    await rig.event(Reply.of(req.session, "reminder: water the plants"))
    await rig.event(Reply.of("no-such-session", "lost"))
    await rig.adapter.wait_sent(2)
    assert [(c, r.kind) for c, r in rig.adapter.sent] == [
        ("a", ReplyKind.ANSWER), ("a", ReplyKind.UNSOLICITED)]


async def test_agent_error_ends_the_turn_and_tells_the_user(rig: Rig) -> None:
    await rig.submit("a", "hello")
    await rig.ready()
    request = await rig.agent.next()
    await rig.event(Failure(request.session, "model overloaded", "agent_error"))
    await rig.adapter.wait_sent(1)
    reply = rig.adapter.sent[0][1]
    assert reply.kind is ReplyKind.ERROR and "model overloaded" in reply.text
    assert (await rig.store.counts()).get("failed") == 1


async def test_lost_turn_is_retried_then_given_up(rig: Rig) -> None:
    await rig.submit("a", "poison")
    await rig.submit("b", "fine")
    await rig.ready()
    for attempt in range(1, 4):
        request = await rig.agent.next()
        assert request.text == "poison"
        await rig.lost(f"crash {attempt}")
        await rig.ready()
    # After the third loss the user is told and the other chat is served.
    assert (await rig.agent.next()).text == "fine"
    await rig.adapter.wait_sent(1)
    chat, reply = rig.adapter.sent[0]
    assert chat == "a" and reply.kind is ReplyKind.ERROR
    assert "failed 3 times" in reply.text and "crash 3" in reply.text


@pytest.mark.parametrize("rig", [{"turn_timeout": 0.2}], indirect=True)
async def test_silent_turn_asks_for_a_restart(rig: Rig) -> None:
    await rig.submit("a", "hello")
    await rig.ready()
    await rig.agent.next()
    await asyncio.wait_for(rig.agent.restarted.wait(), 5)
    assert rig.agent.restarts[0].startswith("turn timeout after 0.2s")


async def test_stop_drops_only_queued_messages(rig: Rig) -> None:
    await rig.submit("a", "running")
    await rig.ready()
    await rig.agent.next()
    await rig.submit("a", "queued 1")
    await rig.submit("a", "queued 2")
    assert rig.router.status(ChatRef("test", "a")).queued == 2
    assert await rig.router.drop_queued(ChatRef("test", "a")) == 2
    assert (await rig.store.counts()).get("dropped") == 2
    assert rig.router.status(ChatRef("test", "a")).turn_running_for is not None


async def test_restart_resumes_unanswered_messages(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "r.db")
    stored = await store.record_inbound(InboundMessage(
        chat=ChatRef("test", "a"), sender_id="u", text="survivor", platform_message_id="x"))
    assert stored is not None
    await store.mark_dispatched([stored.id])  # the daemon died mid-turn
    adapter = Recorder()
    outbox = Outbox(store, {"test": adapter})
    agent = ScriptedAgent()
    router = Router(store, outbox, {"test": adapter}, agent, turn_timeout=60, max_attempts=3,
                    coalesce=True)
    await router.start()
    agent.ready = True
    await router.worker_ready(agent)
    assert (await agent.next()).text == "survivor"
    await router.stop(0)
    await outbox.stop(0)
    await store.close()


async def test_a_long_agent_outage_is_told_once_per_chat_and_outage(rig: Rig) -> None:
    down_since: list[float | None] = [time.monotonic() - 100]

    class Outage:
        def infos(self) -> list[WorkerInfo]:
            return []

        def down_since(self, agent: str | None = None) -> float | None:
            return down_since[0]

        def capabilities(self, agent: str) -> Capabilities:
            return NO_CAPABILITIES

        def assigned_worker(self, session: str) -> str | None:
            return None

    intake = Intake(rig.store, rig.router, rig.outbox,
                    AccessPolicy(rig.store, {"test": frozenset({"u"})}),
                    Commands(rig.store, rig.router, Outage()), Outage(), tell_after=50)

    async def write(chat: str, n: int) -> None:
        await intake.submit(InboundMessage(chat=ChatRef("test", chat), sender_id="u",
                                           text=f"m{n}", platform_message_id=f"{chat}-{n}"))

    await write("a", 1)  # down for 100 s > 50 s: told
    await write("a", 2)  # same outage: not again
    await write("b", 3)  # another chat: told
    down_since[0] = time.monotonic() - 60  # the agent came back and went down again
    await write("a", 4)
    down_since[0] = time.monotonic()  # a fresh outage, shorter than the budget: not yet
    await write("a", 5)
    down_since[0] = None  # ready
    await write("b", 6)
    await rig.outbox.wait_idle()
    notices = [chat for chat, reply in rig.adapter.sent if reply.text == AGENT_DOWN_TEXT]
    assert notices == ["a", "b", "a"]
    assert len(rig.adapter.sent) == 3  # nothing else was sent: the agent never answered
    assert [m.text for m in await rig.store.open_messages()] == [
        "m1", "m2", "m3", "m4", "m5", "m6"]  # every message still waits for the agent


@pytest.mark.parametrize("rig", [{"max_in_flight": 4}], indirect=True)
async def test_messages_put_back_after_a_crash_keep_their_lane(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn's answer finishing its commit while agent_lost runs must not orphan the lane
    the lost turn's messages go back to (they would never be asked again)."""
    await rig.ready()
    await rig.submit("x", "m1")
    first = await rig.agent.next()
    held = asyncio.Event()
    store_reply = rig.store.add_reply

    async def slow_reply(*args: Any, **kwargs: Any) -> StoredReply:
        stored = await store_reply(*args, **kwargs)
        await held.wait()  # committed; the router hears of it late
        return stored

    monkeypatch.setattr(rig.store, "add_reply", slow_reply)
    await rig.event(Reply.of(first.session, "answer 1"))
    await rig.submit("x", "m2")  # its turn starts while answer 1 is still being stored
    assert (await rig.agent.next()).text == "m2"
    monkeypatch.setattr(rig.store, "add_reply", store_reply)
    held.set()
    await rig.lost("crash")  # answer 1's commit completes in here
    await rig.submit("x", "m3")
    await rig.ready()
    again = await rig.agent.next()
    assert again.text == "m2\n\nm3"  # m2 asked again (with m3): nothing stranded
    await rig.event(Reply.of(again.session, "answer 2+3"))
    await rig.adapter.wait_sent(2)
    assert [r.text for _, r in rig.adapter.sent] == ["answer 1", "answer 2+3"]
    assert await rig.store.open_messages() == []


@pytest.mark.parametrize("rig", [{"max_in_flight": 3}], indirect=True)
async def test_turns_of_a_wave_never_sent_are_not_charged_an_attempt(rig: Rig) -> None:
    rig.agent.hold = asyncio.Event()
    for chat in ("a", "b", "c"):
        await rig.submit(chat, f"hello {chat}")
    await rig.ready()  # one wave claims all three, then writes them in turn
    await rig.agent.entered.wait()  # the first write hangs: the others wait behind it
    await rig.lost("crash during the wave")
    rig.agent.hold.set()
    attempts = {m.text: m.attempts for m in await rig.store.open_messages()}
    assert attempts == {"hello a": 1, "hello b": 0, "hello c": 0}
    assert (await rig.agent.next()).text == "hello a"  # the write the crash cut short
    rig.agent.hold = None
    await rig.ready()
    asked = sorted([(await rig.agent.next()).text for _ in range(3)])
    assert asked == ["hello a", "hello b", "hello c"]


async def test_a_reply_handed_over_again_while_it_is_sent_goes_out_once(rig: Rig) -> None:
    await rig.submit("x", "question")
    [message] = await rig.store.open_messages()
    reply = await rig.store.add_reply(ChatRef("test", "x"), OutgoingReply("once"),
                                      settles=[message])
    rig.adapter.hold = asyncio.Event()
    rig.outbox.deliver(reply)
    await rig.adapter.entered.wait()  # being sent, not yet marked sent
    for pending in await rig.store.pending_replies():  # e.g. read back at a start
        rig.outbox.deliver(pending)
    rig.adapter.hold.set()
    await rig.outbox.wait_idle()
    assert [r.text for _, r in rig.adapter.sent] == ["once"]
    assert await rig.store.pending_replies() == []


async def test_a_late_retry_of_an_earlier_message_is_read_in_writing_order(rig: Rig) -> None:
    # Slack retries an event whose acknowledgement a restart lost after newer events: the
    # older message is stored last but was written first.
    for n, sent_at in ((16, 16.0), (17, 17.0), (14, 14.0), (15, 15.0), (18, None)):
        stored = await rig.store.record_inbound(InboundMessage(
            chat=ChatRef("test", "c"), sender_id="u", text=f"m{n}",
            platform_message_id=f"c-{n}", sent_at=sent_at))
        assert stored is not None
        rig.router.enqueue(stored)
    await rig.ready()
    assert (await rig.agent.next()).text == "m14\n\nm15\n\nm16\n\nm17\n\nm18"


async def test_stop_aborts_the_running_turn_only_where_the_protocol_can(rig: Rig) -> None:
    await rig.submit("a", "long job")
    await rig.ready()
    request = await rig.agent.next()
    chat = ChatRef("test", "a")
    assert rig.router.stop_turn(chat) is False  # picobot-like: no abort, no restart
    assert rig.agent.cancelled == [] and rig.agent.restarts == []
    rig.agent.can_abort = True
    assert rig.router.stop_turn(chat) is True
    assert rig.agent.cancelled == [(request.session, "/stop in chat test:a")]
    assert rig.router.stop_turn(ChatRef("test", "idle")) is False


async def test_an_answer_kept_back_by_the_store_is_not_overtaken_by_the_next(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    from picobridge.core import answers

    monkeypatch.setattr(answers, "STORE_RETRY_FIRST", 0.01)
    real = rig.store.add_reply
    refusals = asyncio.Event()
    failures = 0

    async def full_disk_once(*args: Any, **kwargs: Any) -> StoredReply:
        nonlocal failures
        if kwargs.get("settles") and kwargs["settles"][0].text == "first" and failures < 3:
            failures += 1
            refusals.set()
            raise sqlite3.OperationalError("database or disk is full")
        return await real(*args, **kwargs)

    monkeypatch.setattr(rig.store, "add_reply", full_disk_once)
    await rig.submit("x", "first")
    await rig.ready()
    first = await rig.agent.next()
    await rig.event(Reply.of(first.session, "answer 1"))
    await refusals.wait()
    await rig.submit("x", "second")  # its turn runs while answer 1 is kept in memory
    second = await rig.agent.next()
    await rig.event(Reply.of(second.session, "answer 2"))
    await rig.adapter.wait_sent(2)
    assert [r.text for _, r in rig.adapter.sent] == ["answer 1", "answer 2"]
    assert failures == 3
