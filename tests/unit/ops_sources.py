"""A `Sources` of plain values for testing what operations derive from them."""

from __future__ import annotations

import asyncio
from typing import Any

from picobridge.agent.port import WorkerInfo, WorkerState
from picobridge.core.stats import Histogram, IntakeStats, OutboxStats, RouterStats
from picobridge.ops.operations import Sources


class Figures:
    async def counts(self) -> dict[str, int]:
        return {"outbox_pending": 0}

    async def oldest_open_age(self) -> float | None:
        return None

    async def dead_letter_counts(self) -> dict[str, int]:
        return {"message": 0, "reply": 0}


def worker(name: str = "w1", state: WorkerState = WorkerState.READY,
           down_since: float | None = None) -> WorkerInfo:
    return WorkerInfo(name, state, 4321 if state is WorkerState.READY else None, 0, None,
                      None, down_since, 0)


def sources_for(workers: list[WorkerInfo] | None = None, **changes: Any) -> Sources:
    async def first_ready() -> None:
        return None

    made = Sources(
        platforms=["telegram"], workers=lambda: workers or [worker()],
        router=lambda: RouterStats(0, 0, {}, {}, Histogram().snapshot()),
        intake=lambda: IntakeStats(connections={"telegram": True}),
        outbox=lambda: OutboxStats(), store=Figures(), failing=lambda: (),
        first_ready=first_ready, connections_changed=asyncio.Event(),
        restart_budget=300.0, agent_grace=90.0)
    for key, value in changes.items():
        object.__setattr__(made, key, value)
    return made
