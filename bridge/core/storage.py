"""Storage outages as the platforms see them: a database error on the intake path becomes
`StorageUnavailable` (so nothing is acknowledged), logged once when the outage begins and
once when writes succeed again."""

from __future__ import annotations

import logging
import sqlite3
from types import TracebackType

from picobridge.contract import StorageUnavailable
from picobridge.store import StoreError

log = logging.getLogger("picobridge.intake")


class StorageGuard:
    def __init__(self) -> None:
        self._outage: str | None = None

    @property
    def down(self) -> bool:
        return self._outage is not None

    def writing(self, what: str) -> _Writing:
        """Around a store call (awaited inside it): a database error becomes
        StorageUnavailable. A plain context manager: every message goes through one, and an
        async generator's would cost it a generator and its steps for nothing to await."""
        return _Writing(self, what)

    def failed(self, what: str, exc: BaseException) -> StorageUnavailable:
        reason = str(exc) or exc.__class__.__name__
        if self._outage is None:
            log.error("cannot store (%s) while %s: messages are not acknowledged to their "
                      "platforms until the database takes writes again", reason, what)
        self._outage = reason
        return StorageUnavailable(reason)

    def succeeded(self) -> None:
        if self._outage is not None:
            log.warning("the database takes writes again (after: %s); intake resumes",
                        self._outage)
            self._outage = None


class _Writing:
    __slots__ = ("_guard", "_what")

    def __init__(self, guard: StorageGuard, what: str) -> None:
        self._guard = guard
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self._guard.succeeded()
        elif isinstance(exc, sqlite3.Error | StoreError | OSError):
            raise self._guard.failed(self._what, exc) from None
