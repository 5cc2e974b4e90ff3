"""Storage outages as the platforms see them: a database error on the intake path becomes
`StorageUnavailable` (so nothing is acknowledged), logged once when the outage begins and
once when writes succeed again."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from picobridge.contract import StorageUnavailable
from picobridge.store import StoreError

log = logging.getLogger("picobridge.intake")


class StorageGuard:
    def __init__(self) -> None:
        self._outage: str | None = None

    @property
    def down(self) -> bool:
        return self._outage is not None

    @asynccontextmanager
    async def writing(self, what: str) -> AsyncIterator[None]:
        try:
            yield
        except (sqlite3.Error, StoreError, OSError) as exc:
            reason = str(exc) or exc.__class__.__name__
            if self._outage is None:
                log.error("cannot store (%s) while %s: messages are not acknowledged to their "
                          "platforms until the database takes writes again", reason, what)
            self._outage = reason
            raise StorageUnavailable(reason) from None
        if self._outage is not None:
            log.warning("the database takes writes again (after: %s); intake resumes",
                        self._outage)
            self._outage = None
