"""Limits per user ([limits]): at most `messages_per_hour` and `messages_per_day` messages of
one sender reach the agent (all their chats together; 0 = no limit). A message over a limit
is stored, marked, and not sent to the agent; its sender hears once per window when the limit
resets. Counted from the store, so a restart forgets nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from picobridge.store import Store

log = logging.getLogger("picobridge.limits")

HOUR, DAY = 3600.0, 86400.0
TRUSTED_PLATFORMS = frozenset({"console"})


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    why: str = ""  # e.g. "2 per hour"
    resets_at: float = 0.0
    tell: bool = False  # the first refusal of this window: say so


class Quotas:
    def __init__(self, store: Store, per_hour: int, per_day: int, exempt: Collection[str],
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._windows = [(n, span, name) for n, span, name in
                         ((per_hour, HOUR, "hour"), (per_day, DAY, "day")) if n > 0]
        self._exempt = frozenset(exempt)
        self._clock = clock

    def applies(self, platform: str, sender: str) -> bool:
        return bool(self._windows) and platform not in TRUSTED_PLATFORMS \
            and f"{platform}:{sender}" not in self._exempt

    async def check(self, platform: str, sender: str) -> Verdict:
        """Whether the sender's latest stored message may go to the agent."""
        if not self.applies(platform, sender):
            return Verdict(True)
        now = self._clock()
        for limit, span, name in self._windows:
            count, oldest = await self._store.sent_since(platform, sender, now - span)
            if count > limit:
                resets = oldest + span
                return Verdict(False, f"{limit} per {name}", resets,
                               await self._first_refusal(platform, sender, resets))
        return Verdict(True)

    async def _first_refusal(self, platform: str, sender: str, resets: float) -> bool:
        cursor = f"limits.told.{platform}:{sender}"
        told = await self._store.get_cursor(cursor)
        if told is not None and float(told) > self._clock():
            return False
        await self._store.set_cursor(cursor, repr(resets))
        return True

    async def left(self, platform: str, sender: str) -> str | None:
        """What /status says is left, or None when no limit applies."""
        if not self.applies(platform, sender):
            return None
        now = self._clock()
        parts = []
        for limit, span, name in self._windows:
            count, _ = await self._store.sent_since(platform, sender, now - span)
            parts.append(f"{max(0, limit - count)} of {limit} this {name}")
        return "Messages left: " + ", ".join(parts)


def refusal_text(verdict: Verdict) -> str:
    at = datetime.fromtimestamp(verdict.resets_at, UTC).strftime("%H:%M UTC")
    return (f"⏳ You have reached the limit of {verdict.why}. Your message is kept but not "
            f"sent to the agent; the limit resets at {at}.")
