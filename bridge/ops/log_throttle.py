"""At most one log line per cause and interval, however often the cause recurs.

Under abuse (a flood of connections to the listener, a peer that keeps failing the same way)
one line per event would fill the disk and pin a core; one line per cause and interval still
says what happens and how often.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Cause:
    logged_at: float
    suppressed: int = 0


class LogThrottle:
    def __init__(self, logger: logging.Logger, interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._interval = interval
        self._clock = clock
        self._causes: dict[str, _Cause] = {}

    def __call__(self, level: int, cause: str, message: str, *args: object) -> bool:
        """Log `message` unless `cause` was logged within the interval; True when logged.
        The line after a quiet spell says how many were left out."""
        now = self._clock()
        seen = self._causes.get(cause)
        if seen is not None and now - seen.logged_at < self._interval:
            seen.suppressed += 1
            return False
        if seen is not None and seen.suppressed:
            message += " (%d more since the last such line)"
            args = (*args, seen.suppressed)
        self._causes[cause] = _Cause(now)
        self._log.log(level, message, *args)
        return True
