"""Turns: which queued messages go to the agent next, and where the agent's output goes.

One lane per chat. A lane holds the chat's queued messages and at most one turn in flight.
Lanes waiting for the agent sit in a round-robin queue, so one busy chat cannot starve the
others; `agent.max_in_flight` bounds turns across chats. Agent output is correlated on its
session; records without one belong to the single turn in flight, if there is exactly one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from picobridge.agent.port import AgentRequest, Failure, Progress, Reply
from picobridge.agent.worker import AgentUnavailable
from picobridge.contract import (
    Adapter,
    ChatRef,
    Outcome,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
)
from picobridge.core.outbox import Outbox
from picobridge.store import Store, StoredMessage

log = logging.getLogger("picobridge.router")

_PROGRESS = {
    "text": ProgressKind.TEXT,
    "reasoning": ProgressKind.REASONING,
    "tool_start": ProgressKind.TOOL_START,
    "tool_done": ProgressKind.TOOL_DONE,
}


class AgentPort(Protocol):
    """What the router needs of the agent supervisor (kept narrow for tests and benchmarks)."""

    async def send(self, request: AgentRequest) -> None: ...

    def restart(self, reason: str) -> None: ...


@dataclass(slots=True)
class Turn:
    chat: ChatRef
    session: str
    messages: list[StoredMessage]
    started: float
    last_activity: float
    # Written to the agent (or being written). A turn of a dispatch wave is claimed before
    # it is sent; until then nothing the agent says belongs to it.
    sent: bool = False

    @property
    def ids(self) -> list[int]:
        return [m.id for m in self.messages]

    @property
    def attempts(self) -> int:
        return max(m.attempts for m in self.messages)


@dataclass(slots=True)
class Lane:
    chat: ChatRef
    queue: deque[StoredMessage] = field(default_factory=deque)
    turn: Turn | None = None
    waiting: bool = False  # in the round-robin queue


@dataclass(frozen=True, slots=True)
class ChatStatus:
    session: str | None
    queued: int
    turn_running_for: float | None
    lanes_ahead: int


class Router:
    def __init__(
        self,
        store: Store,
        outbox: Outbox,
        adapters: Mapping[str, Adapter],
        *,
        max_in_flight: int,
        turn_timeout: float,
        max_attempts: int,
        coalesce: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._adapters = adapters
        self._max_in_flight = max_in_flight
        self._turn_timeout = turn_timeout
        self._max_attempts = max_attempts
        self._coalesce = coalesce
        self._clock = clock
        self._agent: AgentPort | None = None
        self._agent_ready = False
        self._lanes: dict[str, Lane] = {}
        self._waiting: deque[Lane] = deque()
        self._turns: dict[str, Turn] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._settling: set[asyncio.Task[None]] = set()
        self._recording: set[asyncio.Task[None]] = set()
        # Running totals by outcome and a buffer of turn durations, both read by metrics.
        self.turn_outcomes: dict[str, int] = {}
        self.turn_seconds: list[float] = []

    # -- wiring ----------------------------------------------------------------------------

    def attach_agent(self, agent: AgentPort) -> None:
        self._agent = agent

    async def start(self) -> None:
        """Load what a previous run left unanswered, then begin dispatching."""
        for msg in await self._store.open_messages():
            if msg.status == "dispatched" and msg.attempts >= self._max_attempts:
                await self._give_up([msg], "the bridge restarted while it was being answered")
                continue
            self._lane(msg.chat).queue.append(msg)
        for lane in self._lanes.values():
            self._make_waiting(lane)
        self._tasks = [
            asyncio.create_task(self._dispatch_loop(), name="router-dispatch"),
            asyncio.create_task(self._timeout_loop(), name="router-timeouts"),
        ]
        self._wake.set()

    async def stop(self, grace: float) -> None:
        """Stop dispatching; give turns in flight up to `grace` seconds to finish."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Turns of a wave the cancelled dispatch never sent: nothing to wait for.
        unsent = [turn for turn in self._turns.values() if not turn.sent]
        for turn in unsent:
            self._end_turn(turn, Outcome.REQUEUED)
        if self._turns:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)
        # Answers already received are committed before the store closes.
        await asyncio.gather(*self._settling, return_exceptions=True)
        await self._recorded()
        for turn in [*unsent, *self._turns.values()]:
            # Not the message's fault: the next run retries it without counting this attempt.
            await self._store.requeue(turn.ids, refund=True)
        self._turns.clear()

    # -- intake ----------------------------------------------------------------------------

    def enqueue(self, msg: StoredMessage) -> None:
        lane = self._lane(msg.chat)
        # A message written before others still queued (a platform's late retry) goes ahead
        # of them, so the agent reads the chat in the order it was written.
        position = len(lane.queue)
        if msg.sent_at is not None:
            while position > 0:
                before = lane.queue[position - 1].sent_at
                if before is None or before <= msg.sent_at:
                    break
                position -= 1
        lane.queue.insert(position, msg)
        self._make_waiting(lane)

    def replace_queued(self, msg: StoredMessage) -> None:
        lane = self._lanes.get(msg.chat.key)
        if lane is None:
            return
        for i, queued in enumerate(lane.queue):
            if queued.id == msg.id:
                lane.queue[i] = msg

    async def drop_queued(self, chat: ChatRef) -> int:
        lane = self._lanes.get(chat.key)
        if lane is None or not lane.queue:
            return 0
        ids = [m.id for m in lane.queue]
        lane.queue.clear()
        await self._store.drop_queued(chat, ids)
        self._forget_if_idle(lane)
        return len(ids)

    def status(self, chat: ChatRef) -> ChatStatus:
        lane = self._lanes.get(chat.key)
        if lane is None:
            return ChatStatus(None, 0, None, 0)
        running = self._clock() - lane.turn.started if lane.turn else None
        ahead = 0
        if lane.waiting:
            for other in self._waiting:
                if other is lane:
                    break
                ahead += 1
        session = lane.turn.session if lane.turn else None
        return ChatStatus(session, len(lane.queue), running, ahead)

    @property
    def queue_depth(self) -> int:
        return sum(len(lane.queue) for lane in self._lanes.values()) + sum(
            len(t.messages) for t in self._turns.values())

    @property
    def in_flight(self) -> int:
        return len(self._turns)

    # -- AgentListener ---------------------------------------------------------------------

    def turn_running(self) -> bool:
        return bool(self._turns)

    async def agent_ready(self) -> None:
        self._agent_ready = True
        self._wake.set()

    async def agent_lost(self, reason: str) -> None:
        self._agent_ready = False
        lost: list[tuple[Turn, Outcome]] = []
        # First, synchronously, every lost turn ends and its messages go back to the front of
        # their lane: awaiting anything before would let a turn of the same chat end in
        # between and forget the lane these messages belong to.
        for turn in list(self._turns.values()):
            failed = turn.sent and turn.attempts >= self._max_attempts
            outcome = Outcome.FAILED if failed else Outcome.REQUEUED
            self._end_turn(turn, outcome)
            if not turn.sent:
                # Claimed for a dispatch wave but never written: not an attempt.
                self._put_back(turn, [_with_attempt(m, -1) for m in turn.messages])
            elif not failed:
                log.warning("turn lost chat=%s session=%s attempt=%d: %s; will retry",
                            turn.chat.key, turn.session, turn.attempts, reason)
                self._put_back(turn, turn.messages)
            lost.append((turn, outcome))
        await self._recorded()
        for turn, outcome in lost:
            if outcome is Outcome.FAILED:
                await self._give_up(turn.messages, reason)
            else:
                await self._store.requeue(turn.ids, refund=not turn.sent)
            await self._clear(turn.chat, outcome)

    def _put_back(self, turn: Turn, messages: list[StoredMessage]) -> None:
        lane = self._lane(turn.chat)
        lane.queue.extendleft(reversed(messages))
        self._make_waiting(lane, front=True)

    async def agent_event(self, event: Reply | Progress | Failure) -> None:
        turn = self._turn_for(event.session)
        if turn is not None and not turn.sent:
            turn = None  # e.g. a scheduled job's answer: the claimed turn has not been asked
        if isinstance(event, Progress):
            if turn is not None:
                turn.last_activity = self._clock()
                kind = _PROGRESS.get(event.kind)
                if kind is not None:
                    await self._show(turn, ProgressEvent(kind, event.text, event.tool))
            return
        if isinstance(event, Failure):
            if turn is None:
                log.warning("agent error outside any turn: %s (%s)", event.message, event.code)
                return
            log.warning("agent error chat=%s session=%s: %s (%s)", turn.chat.key, turn.session,
                        event.message, event.code)
            self._end_turn(turn, Outcome.FAILED)
            await self._clear(turn.chat, Outcome.FAILED)
            self._settle(turn, ReplyKind.ERROR,
                         f"⚠️ The agent could not answer this: {event.message}",
                         status="failed", error=event.message)
            return
        if turn is not None:
            self._end_turn(turn, Outcome.DONE)
            await self._clear(turn.chat, Outcome.DONE)
            self._settle(turn, ReplyKind.ANSWER, event.text)
            return
        # No turn waits for it: a scheduled job or a second answer. Its session tells the chat.
        chat = await self._store.chat_for_session(event.session) if event.session else None
        if chat is None:
            log.warning("agent response for unknown session %r dropped", event.session)
            return
        self._outbox.deliver(await self._store.add_reply(
            chat, ReplyKind.UNSOLICITED, event.text, session_id=event.session))

    def _settle(self, turn: Turn, kind: ReplyKind, text: str, *, status: str = "answered",
                error: str | None = None) -> None:
        """Store the turn's reply and hand it to the outbox, without holding up the caller.

        The agent's output is read by one task; committing each answer before reading the
        next would queue every chat's answer behind the others' database round trips. (The
        chat's next turn may start meanwhile; its answer is stored after this one, because
        writes keep their order, and so is delivered after it.)
        """
        async def run() -> None:
            try:
                self._outbox.deliver(await self._store.add_reply(
                    turn.chat, kind, text, session_id=turn.session,
                    reply_to=turn.messages[-1].reply_to, settles=turn.messages,
                    settle_status=status, error=error))
            except Exception:
                # Not stored: the messages stay open and the next start answers them again.
                log.exception("storing the answer failed chat=%s session=%s", turn.chat.key,
                              turn.session)
            finally:
                self._after_turn(turn)

        _keep(self._settling, run(), f"settle-{turn.session}")

    # -- internals -------------------------------------------------------------------------

    def _lane(self, chat: ChatRef) -> Lane:
        lane = self._lanes.get(chat.key)
        if lane is None:
            lane = self._lanes[chat.key] = Lane(chat)
        return lane

    def _make_waiting(self, lane: Lane, front: bool = False) -> None:
        if lane.waiting or lane.turn is not None or not lane.queue:
            return
        lane.waiting = True
        if front:
            self._waiting.appendleft(lane)
        else:
            self._waiting.append(lane)
        self._wake.set()

    def _forget_if_idle(self, lane: Lane) -> None:
        # Lanes are cheap to rebuild; dropping idle ones keeps memory flat with many chats.
        if not lane.queue and lane.turn is None and not lane.waiting:
            self._lanes.pop(lane.chat.key, None)

    def _turn_for(self, session: str | None) -> Turn | None:
        if session is not None:
            return self._turns.get(session)
        if len(self._turns) == 1:
            return next(iter(self._turns.values()))
        return None

    def _end_turn(self, turn: Turn, outcome: Outcome) -> None:
        self.turn_outcomes[outcome.value] = self.turn_outcomes.get(outcome.value, 0) + 1
        if outcome is Outcome.DONE and len(self.turn_seconds) < 10_000:
            self.turn_seconds.append(self._clock() - turn.started)
        if self._turns.get(turn.session) is turn:
            del self._turns[turn.session]
        lane = self._lanes.get(turn.chat.key)
        if lane is not None and lane.turn is turn:
            lane.turn = None
        if not self._turns:
            self._idle.set()

    def _after_turn(self, turn: Turn) -> None:
        lane = self._lanes.get(turn.chat.key)
        if lane is not None:
            self._make_waiting(lane)
            self._forget_if_idle(lane)
        self._wake.set()

    async def _give_up(self, messages: list[StoredMessage], reason: str) -> None:
        last = messages[-1]
        log.error("giving up chat=%s after %d attempts: %s", last.chat.key, last.attempts, reason)
        self._outbox.deliver(await self._store.add_reply(
            last.chat, ReplyKind.ERROR,
            f"⚠️ Sorry, the agent failed {last.attempts} times on your message and I gave up "
            f"({reason}). Please try again later.",
            session_id=last.session_id, reply_to=last.reply_to,
            settles=messages, settle_status="failed", error=reason))

    def _take_batch(self, lane: Lane) -> list[StoredMessage]:
        first = lane.queue.popleft()
        batch = [first]
        while self._coalesce and lane.queue and lane.queue[0].session_id == first.session_id:
            batch.append(lane.queue.popleft())
        return batch

    async def _dispatch_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while (self._agent_ready and self._agent is not None and self._waiting
                   and len(self._turns) < self._max_in_flight):
                agent = self._agent
                turns = self._claim()
                if not turns:
                    continue
                # One write for every turn this round starts (under load many lanes become
                # ready at once), and the agent does not wait for it: the answer that settles
                # these messages is stored only after it, and whatever puts them back in the
                # queue waits for it first (_recorded).
                self._record_dispatch([i for turn in turns for i in turn.ids])
                for turn in turns:
                    await self._start(turn, agent)

    def _record_dispatch(self, ids: list[int]) -> None:
        async def run() -> None:
            try:
                await self._store.mark_dispatched(ids)
            except Exception:
                # Only the attempt count is lost: the messages are answered all the same.
                log.exception("recording a dispatch failed")

        _keep(self._recording, run(), "record-dispatch")

    async def _recorded(self) -> None:
        """Wait until every dispatch so far is written (before putting messages back)."""
        if self._recording:
            await asyncio.gather(*self._recording)

    def _claim(self) -> list[Turn]:
        """Take the next batch of each waiting lane, as far as `max_in_flight` allows.

        Lanes and sessions are claimed here, before any await. Until then a lane looks idle:
        a turn of this chat ending meanwhile would forget it (_forget_if_idle), the chat's
        next message would build a new lane, and a second turn of the same session would
        start and take this one's answer.
        """
        turns: list[Turn] = []
        while self._waiting and len(self._turns) < self._max_in_flight:
            lane = self._waiting.popleft()
            lane.waiting = False
            if lane.turn is not None or not lane.queue:
                self._forget_if_idle(lane)  # e.g. emptied by /stop while it waited
                continue
            batch = [_with_attempt(m) for m in self._take_batch(lane)]
            now = self._clock()
            turn = Turn(lane.chat, batch[0].session_id, batch, now, now)
            lane.turn = turn
            self._turns[turn.session] = turn
            self._idle.clear()
            turns.append(turn)
        return turns

    async def _start(self, turn: Turn, agent: AgentPort) -> None:
        session = turn.session
        if self._turns.get(session) is not turn:
            return  # the agent was lost meanwhile and agent_lost put the messages back
        await self._show(turn, ProgressEvent(ProgressKind.STARTED))
        if self._turns.get(session) is not turn:
            return
        text = "\n\n".join(m.text for m in turn.messages)
        attachments = tuple(a for m in turn.messages for a in m.attachments)
        # Before the write starts: a fast agent may answer before send() returns.
        turn.sent = True
        try:
            await agent.send(AgentRequest(session, text, attachments))
        except AgentUnavailable:
            if self._turns.get(session) is not turn:
                return  # lost during the write: agent_lost has requeued it already
            # The agent went away between the ready check and the write: not this message's
            # fault, so put it back without counting the attempt.
            self._agent_ready = False
            self._end_turn(turn, Outcome.REQUEUED)
            self._put_back(turn, [_with_attempt(m, -1) for m in turn.messages])
            await self._recorded()
            await self._store.requeue(turn.ids, refund=True)

    async def _timeout_loop(self) -> None:
        period = min(1.0, self._turn_timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = self._clock()
            stuck = [t for t in self._turns.values()
                     if now - t.last_activity > self._turn_timeout]
            if stuck and self._agent is not None:
                self._agent.restart(f"turn timeout after {self._turn_timeout:g}s "
                                    f"(chat {stuck[0].chat.key})")

    async def _show(self, turn: Turn, event: ProgressEvent) -> None:
        adapter = self._adapters.get(turn.chat.platform)
        if adapter is None:
            return
        ids = tuple(m.reply_to or m.platform_msg_id for m in turn.messages)
        try:
            await adapter.show_progress(turn.chat, _with_ids(event, ids))
        except Exception:
            log.exception("show_progress failed platform=%s", turn.chat.platform)

    async def _clear(self, chat: ChatRef, outcome: Outcome) -> None:
        adapter = self._adapters.get(chat.platform)
        if adapter is None:
            return
        try:
            await adapter.clear_progress(chat, outcome)
        except Exception:
            log.exception("clear_progress failed platform=%s", chat.platform)


def _keep(tasks: set[asyncio.Task[None]], work: Coroutine[Any, Any, None], name: str) -> None:
    """Run `work` in a task held in `tasks` until it is done (so it can be waited for)."""
    task = asyncio.create_task(work, name=name)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def _with_attempt(msg: StoredMessage, delta: int = 1) -> StoredMessage:
    return replace(msg, attempts=msg.attempts + delta)


def _with_ids(event: ProgressEvent, ids: tuple[str, ...]) -> ProgressEvent:
    return replace(event, message_ids=ids)
