"""The named agents: one worker pool each, behind the one `AgentPool` the router talks to.

Each agent has its own pool, so its own workers (named by agent: `w1` for the agent
`default`, as before there were several, `coder/w1` for the agent `coder`), affinity, backoff,
restart budget and health. The router still keeps the turns in flight per worker name (unique
across agents) and asks for a session's worker with the agent its session belongs to; an
agent that is down or busy only ever holds up its own chats.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from picobridge.agent.pool import WorkerPool
from picobridge.agent.port import AgentListener, Capabilities, WorkerInfo
from picobridge.agent.worker import AgentWorker
from picobridge.contract import DEFAULT_AGENT


def worker_name(agent: str, name: str) -> str:
    """A worker's name across agents: the default agent's keep their names (`w1`), so what a
    single-agent bridge stored and logged still holds."""
    return name if agent == DEFAULT_AGENT else f"{agent}/{name}"


class AgentSet:
    def __init__(self, pools: Mapping[str, WorkerPool]) -> None:
        if not pools:
            raise ValueError("at least one agent is needed")
        self._pools = dict(pools)

    @property
    def names(self) -> list[str]:
        return list(self._pools)

    def pool(self, agent: str) -> WorkerPool | None:
        return self._pools.get(agent)

    # -- AgentPool -------------------------------------------------------------------------

    @property
    def workers(self) -> Sequence[AgentWorker]:
        return [w for pool in self._pools.values() for w in pool.workers]

    def start(self, listener: AgentListener) -> None:
        for pool in self._pools.values():
            pool.start(listener)

    async def stop(self) -> None:
        await asyncio.gather(*(pool.stop() for pool in self._pools.values()))

    def place(self, session: str, busy: Mapping[str, int],
              agent: str = DEFAULT_AGENT) -> AgentWorker | None:
        pool = self._pools.get(agent)
        # An agent no longer configured: its messages wait (its queue is kept) rather than
        # going to an agent that never had their conversation.
        return pool.place(session, busy) if pool is not None else None

    def has_room(self, busy: Mapping[str, int], agent: str | None = None) -> bool:
        if agent is None:
            return any(pool.has_room(busy) for pool in self._pools.values())
        pool = self._pools.get(agent)
        return pool is not None and pool.has_room(busy)

    # -- PoolStatus ------------------------------------------------------------------------

    def infos(self, agent: str | None = None) -> list[WorkerInfo]:
        return [info for name, pool in self._pools.items() if agent in (None, name)
                for info in pool.infos()]

    def down_since(self, agent: str | None = None) -> float | None:
        if agent is not None:
            pool = self._pools.get(agent)
            return pool.down_since() if pool is not None else None
        times = [pool.down_since() for pool in self._pools.values()]
        if any(t is None for t in times):
            return None
        return max(t for t in times if t is not None)

    def capabilities(self, agent: str) -> Capabilities:
        pool = self._pools.get(agent) or self._pools.get(DEFAULT_AGENT) \
            or next(iter(self._pools.values()))
        return pool.capabilities

    def assigned_worker(self, session: str) -> str | None:
        for pool in self._pools.values():
            name = pool.assigned_worker(session)
            if name is not None:
                return name
        return None

    @property
    def first_ready(self) -> bool:
        return any(pool.first_ready for pool in self._pools.values())

    def ready_count(self) -> int:
        return sum(pool.ready_count() for pool in self._pools.values())
