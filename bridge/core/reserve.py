"""Controls that need an agent process to themselves (/compact, /export): the chat's lane and
its session's worker are reserved as for a turn, so no turn of this chat or of another session
runs on that process meanwhile (pi serves one session at a time and switching drops a turn)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from picobridge.agent.port import (
    AgentPool,
    ControlKind,
    ControlRequest,
    ControlResult,
    Worker,
)
from picobridge.contract import DEFAULT_AGENT, ChatRef
from picobridge.core.choices import SessionChoices
from picobridge.core.lanes import Lanes

log = logging.getLogger("picobridge.router")


class Reservations:
    _agents: AgentPool
    _lanes: Lanes
    _busy: dict[str, int]
    _wake: asyncio.Event
    _choices: SessionChoices
    _turn_timeout: float
    _freed: list[asyncio.Future[None]]

    def _room_freed(self) -> None:
        """A turn or a reservation ended, or a worker came up: waiting controls look again."""
        for waiter in self._freed:
            if not waiter.done():
                waiter.set_result(None)
        self._freed.clear()

    async def models(self, agent: str) -> ControlResult:
        """The models the agent offers, from any ready worker of it (no session involved);
        waits up to agent.turn_timeout for one to be ready."""
        async with asyncio.timeout(self._turn_timeout):
            while True:
                for worker in self._agents.workers:
                    if worker.ready and getattr(worker, "agent", DEFAULT_AGENT) == agent:
                        return await worker.control(ControlRequest(ControlKind.MODELS))
                waiter = asyncio.get_running_loop().create_future()
                self._freed.append(waiter)
                await waiter

    async def control(self, chat: ChatRef, session: str, agent: str, kind: ControlKind,
                      argument: str = "") -> ControlResult:
        """Run a control on the chat's session (of `agent`) once its turn (if any) is over and
        its worker is free; waits up to agent.turn_timeout for that."""
        async with self._reserved(chat, session, agent) as worker:
            settings = await self._choices.get(session)
            return await worker.control(ControlRequest(kind, session, argument, settings))

    @contextlib.asynccontextmanager
    async def _reserved(self, chat: ChatRef, session: str, agent: str
                        ) -> AsyncIterator[Worker]:
        lane = self._lanes.lane(chat)
        async with asyncio.timeout(self._turn_timeout):
            while True:
                if lane.turn is None and not lane.held:
                    worker = self._agents.place(session, self._busy, agent)
                    if worker is not None:
                        break
                waiter = asyncio.get_running_loop().create_future()
                self._freed.append(waiter)
                await waiter
        lane.held += 1
        self._busy[worker.name] = self._busy.get(worker.name, 0) + 1
        try:
            yield worker
        finally:
            lane.held -= 1
            self._busy[worker.name] -= 1
            if self._busy[worker.name] <= 0:
                del self._busy[worker.name]
            self._lanes.make_waiting(lane)
            self._lanes.forget_if_idle(lane)
            self._wake.set()
            self._room_freed()
