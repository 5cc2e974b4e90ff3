"""The agent workers and which one serves a session.

A session stays on the worker it was assigned to while that worker is ready. When that worker
is busy and another has room, what happens depends on the protocol: an agent that keeps the
conversation in its process (picobot) would lose it by moving, so the session waits for its
worker; an agent that keeps it in a file the bridge names (prime-rpc) can pick it up anywhere,
so the session moves to the free worker (`Driver.sessions_portable`). A new session, or one
whose worker is down, goes to the ready worker with the most free room (turns in flight
against `max_in_flight`, times its weight) and stays there; assignments are handed to
`on_assign` to be stored, so they survive a daemon restart. A worker still in its first
start of this run is not down: its sessions wait for it (bounded by `ready_timeout`; when
that start fails, they move).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from picobridge.agent.port import AgentListener, Capabilities, WorkerInfo, WorkerState
from picobridge.agent.worker import AgentWorker
from picobridge.contract import DEFAULT_AGENT

log = logging.getLogger("picobridge.agent")

MAX_AFFINITIES = 100_000


class WorkerPool:
    def __init__(self, workers: Sequence[AgentWorker], *, max_in_flight: int,
                 weights: Mapping[str, float] | None = None, portable: bool = False,
                 assigned: Mapping[str, str] | None = None,
                 on_assign: Callable[[str, str], None] | None = None,
                 capabilities: Capabilities | None = None) -> None:
        if not workers:
            raise ValueError("a pool needs at least one worker")
        self._workers = list(workers)
        self._by_name = {w.name: w for w in self._workers}
        self._max_in_flight = max_in_flight
        self._weights = dict(weights or {})
        self._portable = portable
        # session -> worker name, of workers that still exist (a renamed worker's are moot)
        self._assigned = {s: w for s, w in (assigned or {}).items() if w in self._by_name}
        self._on_assign = on_assign
        self._capabilities = capabilities or Capabilities("", frozenset(), frozenset())

    # -- AgentPool -------------------------------------------------------------------------

    @property
    def workers(self) -> Sequence[AgentWorker]:
        return self._workers

    def start(self, listener: AgentListener) -> None:
        for worker in self._workers:
            worker.start(listener)

    async def stop(self) -> None:
        # Together: each stop may wait out a wedged agent (shutdown_timeout, then SIGTERM), and
        # one after another that wait would add up over the pool.
        await asyncio.gather(*(worker.stop() for worker in self._workers))

    def place(self, session: str, busy: Mapping[str, int],
              agent: str = DEFAULT_AGENT) -> AgentWorker | None:
        """This pool's worker for the session (a pool serves one agent: `agent` is that)."""
        name = self._assigned.get(session)
        current = self._by_name.get(name) if name is not None else None
        if current is not None and current.ready:
            if busy.get(current.name, 0) < self._max_in_flight:
                return current
            if not self._portable:
                return None  # its conversation lives in that process: wait for it
        elif current is not None and current.state is WorkerState.STARTING \
                and current.first_start_pending:
            return None  # the daemon just started: its worker is coming up, not down
        chosen = self._roomiest(busy)
        if chosen is not None and chosen is not current:
            if current is not None:
                why = current.state.value if not current.ready else "busy"
                log.info("session %s moves from worker %s (%s) to %s", session, current.name,
                         why, chosen.name)
            if len(self._assigned) >= MAX_AFFINITIES:
                self._assigned.clear()  # lose affinity, never memory
            self._assigned[session] = chosen.name
            if self._on_assign is not None:
                self._on_assign(session, chosen.name)
        return chosen

    def has_room(self, busy: Mapping[str, int]) -> bool:
        return self._roomiest(busy) is not None

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    # -- stats -----------------------------------------------------------------------------

    def assigned_worker(self, session: str) -> str | None:
        return self._assigned.get(session)

    def infos(self) -> list[WorkerInfo]:
        return [w.info() for w in self._workers]

    def down_since(self, agent: str | None = None) -> float | None:
        if any(w.ready for w in self._workers):
            return None
        times = [w.down_since for w in self._workers if w.down_since is not None]
        return max(times) if times else None

    @property
    def first_ready(self) -> bool:
        return any(w.first_ready.is_set() for w in self._workers)

    def ready_count(self) -> int:
        return sum(1 for w in self._workers if w.state is WorkerState.READY)

    # -- internals -------------------------------------------------------------------------

    def _roomiest(self, busy: Mapping[str, int]) -> AgentWorker | None:
        best: AgentWorker | None = None
        best_room = 0.0
        for worker in self._workers:
            if not worker.ready:
                continue
            used = busy.get(worker.name, 0)
            if used >= self._max_in_flight:
                continue
            room = (self._max_in_flight - used) * self._weights.get(worker.name, 1.0)
            if best is None or room > best_room:
                best, best_room = worker, room
        return best
