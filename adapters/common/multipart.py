"""Sending one reply as several platform messages, resumable by its outbox id.

The outbox retries a reply until the platform took all of it, and sends it again after a
restart if the daemon died first. Each part sent is recorded (adapters/common/partlog.py)
before the next one goes, so a later attempt skips what already arrived and each part shows
up once, in order. A part may itself be sent in pieces (Telegram's plain-text fallback): their
ids are "<part>.<n>", and `begun` tells that a part was started that way.

Only replies of several parts are recorded: a one-part reply has nothing to resume, and the
outbox's own record of it (sent or not) is enough. As with any reply, a crash between the last
part and the outbox marking the reply sent means the reply goes again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from picobridge.adapters.common.partlog import PartLog, plan_digest
from picobridge.contract import DeliveryError


class MultipartSend:
    def __init__(self, log: PartLog | None, outbox_id: int | None, plan: str,
                 done: set[str]) -> None:
        self._log = log
        self._outbox_id = outbox_id
        self._plan = plan
        self._done = done
        self._unsaved = False

    @classmethod
    async def begin(cls, log: PartLog, outbox_id: int | None,
                    parts: Sequence[str]) -> MultipartSend:
        """Start (or resume) sending a reply planned as `parts` (their texts, in order)."""
        if outbox_id is None or len(parts) < 2:
            return cls(None, outbox_id, "", set())
        plan = plan_digest(parts)
        return cls(log, outbox_id, plan, await log.load(outbox_id, plan))

    @property
    def resumed(self) -> bool:
        """Whether an earlier attempt got some parts through."""
        return bool(self._done)

    def done(self, part_id: str) -> bool:
        return part_id in self._done

    def begun(self, part_id: str) -> bool:
        """Whether pieces of this part (ids "<part_id>.<n>") were sent."""
        prefix = f"{part_id}."
        return any(done.startswith(prefix) for done in self._done)

    async def part(self, part_id: str, send: Callable[[], Awaitable[object]]) -> None:
        """Send one part unless it went before."""
        if part_id in self._done:
            return
        # What went before is recorded only now, when another part follows it: the last part
        # is never recorded, finishing the reply empties the record anyway.
        if self._unsaved and self._log is not None and self._outbox_id is not None:
            await self._log.save(self._outbox_id, self._plan, self._done)
        self._unsaved = False
        await send()
        self._done.add(part_id)
        self._unsaved = True

    async def finish(self) -> None:
        """The reply is fully sent or refused for good: its record is no longer needed."""
        if self._log is not None and self._outbox_id is not None:
            await self._log.clear(self._outbox_id)

    async def run(self, parts: Sequence[tuple[str, Callable[[], Awaitable[object]]]],
                  to_error: Callable[[Exception], DeliveryError]) -> None:
        """Send `parts` (fingerprint, send) in order, each once, then finish. A failure is
        raised as the platform's DeliveryError; a permanent one finishes too (the outbox
        gives up on it: nothing is left to resume)."""
        try:
            for index, (_, send) in enumerate(parts):
                await self.part(str(index), send)
        except Exception as exc:
            error = to_error(exc)
            if error.permanent:
                await self.finish()
            raise error from exc
        await self.finish()
