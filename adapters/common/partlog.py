"""Which parts of a multi-part reply reached the platform, kept in the bridge's cursors.

A reply split into several messages may fail, or the daemon may die, between two parts. The
outbox then sends the reply again, and without a record the parts that did arrive would be
posted a second time. The record lives in the store (through `BridgeLink.get_cursor` and
`set_cursor`), so it survives a restart, under one cursor per reply:

    <platform>.parts.<outbox id>  ->  {"plan": "<digest of the parts>", "done": ["0", "1"]}

The outbox id names the reply for good (the content would not: two replies may say the same).
The digest of the planned parts guards what the ids mean: progress recorded for another split
(a changed setting or renderer between two runs) is not trusted, and the reply is sent whole
again rather than with a part missing. When the reply is fully sent (or refused for good) the
cursor is emptied; the contract has no way to delete a cursor, so an empty row stays behind.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from typing import Protocol

log = logging.getLogger("picobridge.adapters.parts")


class Cursors(Protocol):
    """The part of `BridgeLink` this needs."""

    async def get_cursor(self, name: str) -> str | None: ...

    async def set_cursor(self, name: str, value: str) -> None: ...


def plan_digest(parts: Iterable[str]) -> str:
    """A short fingerprint of the parts a reply was split into (their texts, in order)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:16]


class PartLog:
    def __init__(self, cursors: Cursors, platform: str) -> None:
        self._cursors = cursors
        self._platform = platform
        # Replies with progress recorded by this process: a retry needs no database read,
        # and finishing one that never recorded anything needs no write.
        self._known: dict[int, tuple[str, frozenset[str]]] = {}

    def key(self, outbox_id: int) -> str:
        return f"{self._platform}.parts.{outbox_id}"

    async def load(self, outbox_id: int, plan: str) -> set[str]:
        """The parts of this plan already sent (empty for a reply never tried)."""
        known = self._known.get(outbox_id)
        if known is not None:
            return set(known[1]) if known[0] == plan else set()
        raw = await self._cursors.get_cursor(self.key(outbox_id))
        if not raw:
            return set()
        try:
            data = json.loads(raw)
            saved_plan, done = str(data["plan"]), {str(part) for part in data["done"]}
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable progress of reply %d", outbox_id)
            saved_plan, done = "", set()
        if saved_plan != plan:
            if saved_plan:
                log.warning("reply %d was split differently when it was last tried; sending "
                            "it whole", outbox_id)
            done = set()
        # Known from now on, also when untrusted: finishing the reply empties the row.
        self._known[outbox_id] = (plan, frozenset(done))
        return done

    async def save(self, outbox_id: int, plan: str, done: Iterable[str]) -> None:
        parts = frozenset(done)
        self._known[outbox_id] = (plan, parts)
        await self._cursors.set_cursor(self.key(outbox_id),
                                       json.dumps({"plan": plan, "done": sorted(parts)}))

    async def clear(self, outbox_id: int) -> None:
        """The reply needs no record any more (fully sent, or refused for good)."""
        if self._known.pop(outbox_id, None) is not None:
            await self._cursors.set_cursor(self.key(outbox_id), "")
