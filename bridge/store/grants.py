"""The operator's access grants and denials, and which unknown users were already told."""

from __future__ import annotations

import os
import time
from pathlib import Path

import aiosqlite

from picobridge.private import open_private
from picobridge.store.connection import Database
from picobridge.store.reading import ACCESS_GRANTS, grant_rows


class GrantTable(Database):
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db, path)
        self._access_marker = path.with_name(path.name + ".access-changed")
        self._access_marker_name = str(self._access_marker)  # stat()ed for every message

    async def access_decision(self, platform: str, user_id: str) -> bool | None:
        """The operator's explicit grant (True) or denial (False), None when never decided."""
        row = await self._one("SELECT allowed FROM access_grants WHERE platform = ? AND"
                              " user_id = ?", (platform, user_id))
        return bool(row[0]) if row else None

    async def set_access(self, platform: str, user_id: str, allowed: bool) -> None:
        async with self._tx() as db:
            await db.execute(
                "INSERT INTO access_grants(platform, user_id, allowed, changed_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(platform, user_id) DO UPDATE SET"
                " allowed = excluded.allowed, changed_at = excluded.changed_at",
                (platform, user_id, int(allowed), time.time()))
            # A user denied again is told again the next time they write.
            await db.execute("DELETE FROM access_notices WHERE platform = ? AND user_id = ?",
                             (platform, user_id))
        self._mark_access_changed()

    def _mark_access_changed(self) -> None:
        """A fresh marker file put in place of the old one: the old one may belong to another
        user (root ran `access` once) whose times we may not set, but the folder is ours."""
        marker = self._access_marker
        # Two changes within the file system's timestamp granularity must still differ.
        stamp = max(time.time_ns(), self.access_stamp() + 1)
        fresh = marker.with_name(f"{marker.name}.{os.getpid()}")
        os.close(open_private(fresh, os.O_WRONLY))
        os.utime(fresh, ns=(stamp, stamp))
        os.replace(fresh, marker)

    def access_stamp(self) -> int:
        """Changes whenever any process changes a grant: lets callers cache decisions.

        A stat is far cheaper than a database round trip on every message, and `picobridge
        access` runs in another process, so an in-memory flag would not see it.
        """
        try:
            return os.stat(self._access_marker_name).st_mtime_ns
        except FileNotFoundError:
            return 0

    async def access_grants(self) -> list[tuple[str, str, bool, float]]:
        return grant_rows(await self._all(ACCESS_GRANTS))

    async def first_denial(self, platform: str, user_id: str) -> bool:
        """Record that this unknown user was told; True only the first time."""
        rows = await self._all(
            "INSERT INTO access_notices(platform, user_id, notified_at) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1", (platform, user_id, time.time()))
        return bool(rows)
