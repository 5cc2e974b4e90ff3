"""The router's dispatch side: claiming waiting lanes for their workers in waves, handing the
turns over, and stopping turns that outlive agent.turn_timeout (core/router.py holds the rest:
intake, the agent's events, the end of turns)."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from picobridge.agent.port import AgentPool, AgentRequest, AgentUnavailable, SessionSettings
from picobridge.contract import Outcome, ProgressEvent, ProgressKind
from picobridge.core.choices import SessionChoices
from picobridge.core.lanes import Lanes
from picobridge.core.progress import ProgressRelay
from picobridge.core.turns import Turn, overdue, with_attempt
from picobridge.store import Store, StoredMessage

log = logging.getLogger("picobridge.router")


class Dispatcher:
    _store: Store
    _agents: AgentPool
    _lanes: Lanes
    _turns: dict[str, Turn]
    _busy: dict[str, int]
    _wake: asyncio.Event
    _idle: asyncio.Event
    _progress: ProgressRelay
    _recording: set[asyncio.Future[None]]  # dispatch records not yet written
    _writers: dict[str, asyncio.Task[None]]  # per worker name: the task handing it turns
    _to_write: dict[str, collections.deque[Turn]]  # what each of them has still to hand over
    _turn_timeout: float
    _turn_timeouts: dict[str, float]
    _clock: Callable[[], float]
    _choices: SessionChoices

    def _end_turn(self, turn: Turn, outcome: Outcome) -> None:
        raise NotImplementedError

    def _put_back(self, turn: Turn, messages: list[StoredMessage]) -> None:
        raise NotImplementedError

    async def _settings_of(self, session: str) -> SessionSettings:
        """What the person chose for the session (applied by the driver at switch-in)."""
        return await self._choices.get(session)

    async def _dispatch_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            turns = self._claim()
            if not turns:
                continue
            # One write for every turn this round starts (under load many lanes become
            # ready at once), and the agent does not wait for it: the answer that settles
            # these messages is stored only after it, and whatever puts them back in the
            # queue waits for it first (_recorded).
            self._record_dispatch([i for turn in turns for i in turn.ids])
            self._hand_over(turns)

    def _hand_over(self, turns: list[Turn]) -> None:
        """Queue a wave's turns on their workers' writers: one after another on a worker (its
        pipe takes one write at a time), each worker on its own and the dispatch loop on to
        the next wave at once, so a worker slow to take a turn (a session switch, a full pipe
        of an agent that stopped reading) holds up only the turns placed on it."""
        for turn in turns:
            name = turn.worker.name
            self._to_write.setdefault(name, collections.deque()).append(turn)
            if name not in self._writers:
                self._writers[name] = asyncio.create_task(self._write_turns(name),
                                                          name=f"turns-to-{name}")

    async def _write_turns(self, name: str) -> None:
        queue = self._to_write[name]
        try:
            while queue:
                turn = queue.popleft()
                try:
                    await self._start(turn)
                except Exception:
                    log.exception("handing a turn to worker %s failed; it waits for another "
                                  "try", name)
                    await self._not_written(turn)
        finally:
            del self._writers[name]
            if not queue:
                del self._to_write[name]

    async def _stop_writers(self) -> None:
        """Stop handing over turns (the daemon is stopping): those not begun stay unsent."""
        writers = list(self._writers.values())
        for task in writers:
            task.cancel()
        await asyncio.gather(*writers, return_exceptions=True)

    def _claim(self) -> list[Turn]:
        """Take the next batch of each waiting lane whose session can start now.

        Lanes and sessions are claimed here, before any await. Until then a lane looks idle:
        a turn of this chat ending meanwhile would forget it, the chat's next message would
        build a new lane, and a second turn of the same session would take this one's answer.
        A lane whose worker is busy keeps its place at the front of the round robin.
        """
        turns: list[Turn] = []
        skipped = []
        full: set[str] = set()  # agents none of whose workers has room now
        # Every arrival and every turn's end wakes the loop: while no worker has room, the
        # waiting lanes are not asked for one by one (each would be told to wait).
        while self._agents.has_room(self._busy) \
                and (lane := self._lanes.next_waiting()) is not None:
            first = lane.queue[0]
            worker = None if first.agent in full \
                else self._agents.place(first.session_id, self._busy, first.agent)
            if worker is None:
                skipped.append(lane)
                if not self._agents.has_room(self._busy, first.agent):
                    full.add(first.agent)
                continue
            batch = [with_attempt(m) for m in self._lanes.take_batch(lane)]
            now = self._clock()
            turn = Turn(lane.chat, batch[0].session_id, batch, worker, now, now)
            lane.turn = turn
            self._turns[turn.session] = turn
            self._busy[worker.name] = self._busy.get(worker.name, 0) + 1
            self._idle.clear()
            turns.append(turn)
        self._lanes.return_skipped(skipped)
        return turns

    def _record_dispatch(self, ids: list[int]) -> None:
        # Queued on the store at once, without a task of its own to wait for it.
        written = self._store.mark_dispatched_soon(ids)
        self._recording.add(written)
        written.add_done_callback(self._dispatch_recorded)

    def _dispatch_recorded(self, written: asyncio.Future[None]) -> None:
        self._recording.discard(written)
        if written.cancelled():
            return
        exc = written.exception()
        if exc is not None:
            # Only the attempt count is lost: the messages are answered all the same.
            log.warning("recording a dispatch failed (%s: %s); only the attempt count is "
                        "lost", exc.__class__.__name__, exc)

    async def _recorded(self) -> None:
        """Wait until every dispatch so far is written (before putting messages back)."""
        if self._recording:
            await asyncio.wait(list(self._recording))

    async def _start(self, turn: Turn) -> None:
        session = turn.session
        if self._turns.get(session) is not turn:
            return  # the worker was lost meanwhile and worker_lost put the messages back
        await self._progress.show(turn, ProgressEvent(ProgressKind.STARTED))
        if self._turns.get(session) is not turn:
            return
        text = "\n\n".join(m.text for m in turn.messages if m.text)
        attachments = tuple(a for m in turn.messages for a in m.attachments)
        try:
            settings = await self._settings_of(session)
        except Exception as exc:
            # Only the person's choice of model is lost for this turn, not the turn.
            log.warning("could not read the settings of session %s (%s)", session,
                        exc.__class__.__name__)
            settings = SessionSettings()
        if self._turns.get(session) is not turn:
            return
        # Before the write starts: a fast agent may answer before send() returns.
        turn.sent = True
        try:
            await turn.worker.send(AgentRequest(session, text, attachments, settings))
        except AgentUnavailable:
            await self._not_written(turn)

    async def _not_written(self, turn: Turn) -> None:
        if self._turns.get(turn.session) is not turn:
            return  # lost during the write: worker_lost has requeued it already
        # The worker went away between placing and writing: not this message's fault, so
        # put it back without counting the attempt.
        self._end_turn(turn, Outcome.REQUEUED)
        self._put_back(turn, [with_attempt(m, -1) for m in turn.messages])
        await self._recorded()
        await self._store.requeue(turn.ids, refund=True)

    async def _timeout_loop(self) -> None:
        period = min(1.0, self._turn_timeout / 4, *(t / 4 for t in self._turn_timeouts.values()))
        while True:
            await asyncio.sleep(period)
            for turn, limit in overdue(list(self._turns.values()), self._clock(),
                                       self._turn_timeouts, self._turn_timeout):
                turn.timed_out = True
                turn.worker.cancel_turn(turn.session, f"turn timeout after {limit:g}s "
                                                      f"(chat {turn.chat.key})")
