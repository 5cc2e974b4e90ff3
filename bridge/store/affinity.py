"""Which agent worker serves each session, so the assignment survives a daemon restart."""

from __future__ import annotations

import time

from picobridge.store.connection import Database


class AffinityTable(Database):
    async def worker_assignments(self) -> dict[str, str]:
        """Current sessions (a chat's current one with each agent) and their workers (ended
        sessions are not worth a worker's room)."""
        rows = await self._all(
            "SELECT w.session_id, w.worker FROM session_workers w"
            " JOIN sessions s ON s.session_id = w.session_id AND s.ended_at IS NULL")
        return {str(r[0]): str(r[1]) for r in rows}

    async def assign_worker(self, session_id: str, worker: str) -> None:
        await self._all(
            "INSERT INTO session_workers(session_id, worker, assigned_at) VALUES (?, ?, ?)"
            " ON CONFLICT(session_id) DO UPDATE SET worker = excluded.worker,"
            " assigned_at = excluded.assigned_at", (session_id, worker, time.time()))

    async def forget_ended_assignments(self) -> int:
        """Drop the assignments of sessions that are no longer current with their agent."""
        rows = await self._all(
            "DELETE FROM session_workers WHERE session_id NOT IN"
            " (SELECT session_id FROM sessions WHERE ended_at IS NULL) RETURNING 1")
        return len(rows)
