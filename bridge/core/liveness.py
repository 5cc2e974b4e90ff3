"""Inbound liveness per platform: when each last delivered anything (an event, a completed
poll, the answer to a ping), and which are connected but silent. A connection can report
"up" and carry nothing (a websocket whose far end went quiet); this is how that shows on
/healthz, /metrics and the status page."""

from __future__ import annotations

import time
from collections.abc import Callable


class Liveness:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heard: dict[str, float] = {}
        self._silent: dict[str, float] = {}  # platform -> seconds silent when reported

    def heard_from(self, platform: str) -> None:
        self._heard[platform] = self._clock()
        self._silent.pop(platform, None)

    def silence(self, platform: str, seconds: float | None) -> None:
        if seconds is None:
            self._silent.pop(platform, None)
        else:
            self._silent[platform] = seconds

    def ages(self) -> dict[str, float]:
        """Seconds since each platform last delivered anything."""
        now = self._clock()
        return {platform: now - at for platform, at in self._heard.items()}

    def silent(self) -> dict[str, float]:
        return dict(self._silent)
