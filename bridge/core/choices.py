"""What people chose per session (/model, /think), read on every turn's path: kept in memory
after the first read, written through to the store."""

from __future__ import annotations

from collections import OrderedDict

from picobridge.agent.port import SessionSettings
from picobridge.store import Store

MAX_CACHED = 10_000


class SessionChoices:
    def __init__(self, store: Store, size: int = MAX_CACHED) -> None:
        self._store = store
        self._cached: OrderedDict[str, SessionSettings] = OrderedDict()
        self._size = size

    async def get(self, session: str) -> SessionSettings:
        found = self._cached.get(session)
        if found is None:
            choice = await self._store.session_choice(session)
            found = SessionSettings(choice.model or None, choice.thinking or None)
            self._keep(session, found)
        return found

    async def choose(self, session: str, *, model: str | None = None,
                     thinking: str | None = None) -> SessionSettings:
        """Store a choice; None leaves that part as it was, "" clears it."""
        await self._store.choose_for_session(session, model=model, thinking=thinking)
        current = await self.get(session)
        chosen = SessionSettings((model if model is not None else current.model) or None,
                                 (thinking if thinking is not None else current.thinking)
                                 or None)
        self._keep(session, chosen)
        return chosen

    def _keep(self, session: str, settings: SessionSettings) -> None:
        self._cached[session] = settings
        self._cached.move_to_end(session)
        while len(self._cached) > self._size:
            self._cached.popitem(last=False)
