"""The session-to-worker assignments stored as the pool makes them."""

from __future__ import annotations

import asyncio
import logging

from picobridge.store import Store

log = logging.getLogger("picobridge.daemon")


class AffinityRecorder:
    """Stores each new session-to-worker assignment without holding up the dispatch that
    made it (losing one to a failed write only costs that session its worker after a
    restart)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._writes: set[asyncio.Task[None]] = set()

    def __call__(self, session: str, worker: str) -> None:
        task = asyncio.create_task(self._write(session, worker), name="assign-worker")
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, session: str, worker: str) -> None:
        try:
            await self._store.assign_worker(session, worker)
        except Exception as exc:
            log.warning("could not store that session %s runs on worker %s (%s)", session,
                        worker, exc.__class__.__name__)

    async def settle(self) -> None:
        await asyncio.gather(*self._writes, return_exceptions=True)
