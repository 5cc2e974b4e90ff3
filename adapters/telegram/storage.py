"""Telegram's side of a storage outage (a full disk, a database locked by another process or
made read-only): updates wait, unconfirmed, and are offered to the bridge again until it can
store them.

The bridge raises `StorageUnavailable` when nothing was stored. It is never a reason to skip
an update: while polling, the update's task pauses and tries again (the offset stays on it, so
Telegram keeps it even across a restart); a webhook answers 503 instead, and Telegram sends the
update again. The bridge logs the outage itself; this side adds one line per outage, and
retries are logged at DEBUG only, so a long outage does not flood the log.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from picobridge.adapters.common.backoff import Backoff
from picobridge.contract import StorageUnavailable

log = logging.getLogger("picobridge.telegram")

T = TypeVar("T")

# A store that cannot write usually comes back within seconds (a lock released, space freed);
# beyond a few seconds between tries there is nothing to gain but latency after recovery.
RETRY_FIRST = 0.5
RETRY_CAP = 5.0

# A file that cannot be saved for these reasons is an outage of the disk, not a bad file.
_DISK_OUTAGES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def disk_outage(exc: OSError) -> bool:
    """Whether an error writing a file means the disk cannot take writes right now."""
    return exc.errno in _DISK_OUTAGES


class StorageWait:
    def __init__(self, *, hold: bool, first: float = RETRY_FIRST,
                 cap: float = RETRY_CAP) -> None:
        """`hold`: pause and try again (polling); otherwise re-raise at once (a webhook,
        whose platform sends the update again)."""
        self._hold = hold
        self._first = first
        self._cap = cap
        self._outage: str | None = None

    @property
    def down(self) -> bool:
        return self._outage is not None

    async def run(self, what: str, step: Callable[[], Awaitable[T]], *,
                  writes: bool = True) -> T:
        """`step()`, again after a pause for as long as the store is unavailable.

        Only a step that `writes` ends the outage when it succeeds: reads work on a full disk
        and would announce a recovery that has not happened.
        """
        backoff = Backoff(self._first, self._cap)
        while True:
            try:
                result = await step()
            except StorageUnavailable as exc:
                self._note(what, str(exc))
                if not self._hold:
                    raise
                delay = backoff.next()
                log.debug("store unavailable while %s; trying again in %.1fs", what, delay)
                await asyncio.sleep(delay)
                continue
            if writes and self._outage is not None:
                log.debug("the store takes writes again (after: %s)", self._outage)
                self._outage = None
            return result

    def _note(self, what: str, reason: str) -> None:
        if self._outage is None:
            held = "held unconfirmed and offered again" if self._hold else \
                "refused (503) so that Telegram sends them again"
            log.warning("cannot store Telegram updates (%s, while %s): they are %s until the "
                        "store takes writes again", reason, what, held)
        self._outage = reason

