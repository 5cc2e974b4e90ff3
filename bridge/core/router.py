"""Turns: which queued messages go to which agent worker next, and where the agent's output goes.

Lanes (core/lanes.py) hold each chat's queue and wait in round-robin order; the agent pool
says which worker a session's turn runs on (or that it must wait for its worker). Every agent
event arrives stamped with its session and its worker, so a record is matched to a turn only
when both agree; anything else is an unsolicited answer, found its chat through the store.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from picobridge.agent.port import (
    AgentEvent,
    AgentPool,
    DialogRequest,
    Failure,
    Progress,
    Reply,
    Worker,
)
from picobridge.contract import (
    Adapter,
    ChatRef,
    DialogAnswer,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
)
from picobridge.core.answers import Answers
from picobridge.core.busy import BusyHandling
from picobridge.core.choices import SessionChoices
from picobridge.core.dialogs import Dialogs
from picobridge.core.dispatch import Dispatcher
from picobridge.core.lanes import Lanes
from picobridge.core.modes import BusyModes
from picobridge.core.outbox import Outbox
from picobridge.core.progress import ProgressRelay
from picobridge.core.reserve import Reservations
from picobridge.core.stats import ChatStatus, Histogram, RouterStats, bump
from picobridge.core.turns import Turn, with_attempt
from picobridge.store import Store, StoredMessage
from picobridge.supervision import InOrder, TaskSupervisor, keep

log = logging.getLogger("picobridge.router")

STOPPED = "_(stopped: the agent was restarted to stop this reply)_"

_PROGRESS = {
    "text": ProgressKind.TEXT,
    "reasoning": ProgressKind.REASONING,
    "tool_start": ProgressKind.TOOL_START,
    "tool_done": ProgressKind.TOOL_DONE,
    "status": ProgressKind.STATUS,
}


class Router(Dispatcher, Reservations, BusyHandling):
    def __init__(self, store: Store, outbox: Outbox, adapters: Mapping[str, Adapter],
                 agents: AgentPool, *, turn_timeout: float, max_attempts: int, coalesce: bool,
                 tasks: TaskSupervisor | None = None, dialogs: Dialogs | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 turn_timeouts: Mapping[str, float] | None = None,
                 answers: Answers | None = None,
                 choices: SessionChoices | None = None) -> None:
        self._store = store
        self._choices = choices if choices is not None else SessionChoices(store)
        self._outbox = outbox
        self._progress = ProgressRelay(adapters)
        self._agents = agents
        self._turn_timeout = turn_timeout
        self._turn_timeouts = dict(turn_timeouts or {})  # per agent, where it differs
        self._max_attempts = max_attempts
        self._clock = clock
        self._lanes = Lanes(coalesce)
        self._turns: dict[str, Turn] = {}
        self._busy: dict[str, int] = {}  # turns in flight per worker name
        self._wake = asyncio.Event()
        self._freed: list[asyncio.Future[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._supervisor = tasks if tasks is not None else TaskSupervisor()
        self._answers = answers if answers is not None else Answers(store, outbox)
        self._dialogs = dialogs if dialogs is not None else Dialogs(store, outbox, 300.0)
        self._recording: set[asyncio.Future[None]] = set()
        self._writers: dict[str, asyncio.Task[None]] = {}
        self._to_write: dict[str, collections.deque[Turn]] = {}
        self._sending: set[asyncio.Task[None]] = set()
        self._arriving = InOrder(self._sending)
        self.busy_modes: BusyModes | None = None  # None: every message waits (collect)
        self._closing: set[asyncio.Task[None]] = set()
        self._outcomes: dict[str, int] = {}
        self._turn_seconds = Histogram()

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Load what a previous run left unanswered, then begin dispatching."""
        for msg in await self._store.open_messages():
            if msg.status == "dispatched" and msg.attempts >= self._max_attempts:
                self._answers.give_up([msg], "the bridge restarted while it was being answered")
                continue
            self._lanes.add(msg)
        self._supervisor.start("router-dispatch", self._dispatch_loop)
        self._supervisor.start("router-timeouts", self._timeout_loop)
        self._wake.set()

    async def stop(self, grace: float) -> None:
        """Stop dispatching; give turns in flight up to `grace` seconds to finish."""
        await self._supervisor.cancel("router-dispatch", "router-timeouts")
        await self._stop_writers()
        # Turns of a wave the cancelled dispatch never sent: nothing to wait for.
        unsent = [turn for turn in self._turns.values() if not turn.sent]
        for turn in unsent:
            self._end_turn(turn, Outcome.REQUEUED)
        if self._turns:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._idle.wait()
        # Answers already received are committed before the store closes, if it lets us.
        await self._answers.wind_up(grace)
        await self._dialogs.stop()  # nobody waits for their answers now: buttons go
        await self._recorded()
        for turn in [*unsent, *self._turns.values()]:
            # Not the message's fault: the next run retries it without counting this attempt.
            await self._store.requeue(turn.ids, refund=True)
        self._turns.clear()

    # -- intake ----------------------------------------------------------------------------

    def enqueue(self, msg: StoredMessage) -> None:
        if self._lanes.add(msg):
            self._wake.set()

    def replace_queued(self, msg: StoredMessage) -> None:
        self._lanes.replace(msg)

    def queued_senders(self) -> set[tuple[str, str]]:
        return self._lanes.senders()

    def unqueue_senders(self, senders: set[tuple[str, str]]) -> list[StoredMessage]:
        return self._lanes.remove_from(senders)

    async def drop_queued(self, chat: ChatRef) -> int:
        lane = self._lanes.get(chat.key)
        if lane is None or not lane.queue:
            return 0
        ids = [m.id for m in lane.queue]
        lane.queue.clear()
        await self._store.drop_queued(chat, ids)
        self._lanes.forget_if_idle(lane)
        return len(ids)

    def stop_turn(self, chat: ChatRef) -> bool:
        """Ask the agent to stop the chat's running turn, where its protocol can do that
        without a restart (one person's /stop must not restart everyone's agent)."""
        lane = self._lanes.get(chat.key)
        turn = lane.turn if lane is not None else None
        if turn is None or not turn.sent or not turn.worker.can_abort:
            return False
        turn.stopping = True
        turn.worker.cancel_turn(turn.session, f"/stop in chat {chat.key}")
        return True

    def status(self, chat: ChatRef) -> ChatStatus:
        lane = self._lanes.get(chat.key)
        if lane is None:
            return ChatStatus(None, 0, None, 0)
        turn = lane.turn
        running = self._clock() - turn.started if turn else None
        return ChatStatus(turn.session if turn else None, len(lane.queue), running,
                          self._lanes.ahead_of(lane), turn.worker.name if turn else None)

    def stats(self) -> RouterStats:
        depth = self._lanes.queued + sum(len(t.messages) for t in self._turns.values())
        return RouterStats(depth, len(self._turns), dict(self._busy), dict(self._outcomes),
                           self._turn_seconds.snapshot())

    # -- AgentListener ---------------------------------------------------------------------

    def turn_running(self, worker: Worker) -> bool:
        return self._busy.get(worker.name, 0) > 0

    async def worker_ready(self, worker: Worker) -> None:
        self._wake.set()
        self._room_freed()

    async def worker_lost(self, worker: Worker, reason: str) -> None:
        self._wake.set()  # sessions waiting for this worker's first start may move now
        # First, synchronously, every lost turn ends and its messages go back to the front of
        # their lane: awaiting anything before would let a turn of the same chat end in
        # between and forget the lane these messages belong to.
        lost: list[tuple[Turn, Outcome]] = []
        for turn in [t for t in self._turns.values() if t.worker is worker]:
            # Messages sent into it are asked again with it (see core/busy.py).
            turn.messages = sorted([*turn.messages, *turn.pending.values()], key=lambda m: m.id)
            turn.pending.clear()
            if turn.sent and turn.stopping:
                # Killed to stop it (the agent did not end it after an abort): what the
                # person asked for, not a turn to run again.
                self._end_turn(turn, Outcome.DONE)
                lost.append((turn, Outcome.DONE))
                continue
            failed = turn.sent and turn.attempts >= self._max_attempts
            outcome = Outcome.FAILED if failed else Outcome.REQUEUED
            self._end_turn(turn, outcome)
            if not turn.sent:
                # Claimed for a dispatch wave but never written: not an attempt.
                self._put_back(turn, [with_attempt(m, -1) for m in turn.messages])
            elif not failed:
                log.warning("turn lost chat=%s session=%s worker=%s attempt=%d: %s; will "
                            "retry", turn.chat.key, turn.session, worker.name, turn.attempts,
                            reason)
                self._put_back(turn, turn.messages)
            lost.append((turn, outcome))
        await self._recorded()
        for turn, outcome in lost:
            if outcome is Outcome.DONE:
                self._answers.settle(turn, OutgoingReply(STOPPED), self._after_turn)
            elif outcome is Outcome.FAILED:
                self._answers.give_up(turn.messages, reason)
            else:
                await self._store.requeue(turn.ids, refund=not turn.sent)
            await self._progress.clear(turn.chat, outcome)

    async def agent_event(self, worker: Worker, event: AgentEvent) -> None:
        turn = self._turns.get(event.session) if event.session is not None else None
        if turn is not None and (not turn.sent or turn.worker is not worker):
            turn = None  # e.g. a scheduled job's answer while the session's turn waits
        if isinstance(event, Progress):
            if turn is not None:
                turn.last_activity = self._clock()
                kind = _PROGRESS.get(event.kind)
                if kind is not None:
                    await self._progress.show(turn, ProgressEvent(kind, event.text, event.tool))
            return
        if isinstance(event, Reply | Failure) and turn is not None \
                and await self._turn_reply(turn, event):
            return
        if isinstance(event, Failure):
            await self._failed(turn, event)
            return
        if isinstance(event, DialogRequest):
            await self._ask(worker, turn, event)
            return
        if turn is not None:
            self._end_turn(turn, Outcome.DONE)
            await self._progress.clear(turn.chat, Outcome.DONE)
            if turn.messages:
                self._answers.settle(turn, event.reply, self._after_turn)
                return
            self._after_turn(turn)  # a follow-up the bridge did not know of: still its chat's
        await self._answers.unsolicited(event.session, event.reply)

    async def _ask(self, worker: Worker, turn: Turn | None, request: DialogRequest) -> None:
        if turn is None:
            # Nobody's turn is waiting for this answer: let the agent go on.
            await worker.answer_dialog(request.request_id, DialogAnswer(cancelled=True))
            return
        turn.last_activity = self._clock()
        try:
            await self._dialogs.ask(turn, request)
        except Exception:
            log.exception("asking chat=%s failed; the agent hears 'cancelled'", turn.chat.key)
            await worker.answer_dialog(request.request_id, DialogAnswer(cancelled=True))

    async def _failed(self, turn: Turn | None, event: Failure) -> None:
        if turn is None:
            log.warning("agent error outside any turn: %s (%s)", event.message, event.code)
            return
        log.warning("agent error chat=%s session=%s: %s (%s)", turn.chat.key, turn.session,
                    event.message, event.code)
        self._end_turn(turn, Outcome.FAILED)
        await self._progress.clear(turn.chat, Outcome.FAILED)
        self._answers.settle(turn, OutgoingReply(
            f"⚠️ The agent could not answer this: {event.message}", ReplyKind.ERROR),
            self._after_turn, status="failed", error=event.message)

    # -- internals -------------------------------------------------------------------------

    def _put_back(self, turn: Turn, messages: list[StoredMessage]) -> None:
        if self._lanes.put_back(turn.chat, messages):
            self._wake.set()

    def _end_turn(self, turn: Turn, outcome: Outcome) -> None:
        if self._dialogs.asking(turn.chat) is not None:
            keep(self._closing, self._dialogs.turn_ended(turn.session),
                 f"dialogs-{turn.session}")
        bump(self._outcomes, outcome.value)
        if outcome is Outcome.DONE:
            self._turn_seconds.observe(self._clock() - turn.started)
        if self._turns.get(turn.session) is turn:
            del self._turns[turn.session]
            name = turn.worker.name
            self._busy[name] = self._busy.get(name, 1) - 1
            if self._busy[name] <= 0:
                del self._busy[name]
        lane = self._lanes.get(turn.chat.key)
        if lane is not None and lane.turn is turn:
            lane.turn = None
        if not self._turns:
            self._idle.set()
        self._wake_if_waiting()  # the worker has room again
        self._room_freed()

    def _after_turn(self, turn: Turn) -> None:
        lane = self._lanes.get(turn.chat.key)
        if lane is not None:
            self._lanes.make_waiting(lane)
            self._lanes.forget_if_idle(lane)
        self._wake_if_waiting()

    def _wake_if_waiting(self) -> None:
        # Only waiting lanes can start a turn: waking the dispatch loop for none (most turns'
        # ends under load, each answer's too) costs a turn of the event loop for nothing.
        if self._lanes.any_waiting:
            self._wake.set()
