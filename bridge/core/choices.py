"""What people chose per session (/model, /think), read on every turn's path: kept in memory
after the first read, written through to the store."""

from __future__ import annotations

from picobridge.agent.port import SessionSettings
from picobridge.store import Store

MAX_CACHED = 10_000
# Most sessions choose nothing: they all share this one object.
NOTHING_CHOSEN = SessionSettings()


class SessionChoices:
    def __init__(self, store: Store, size: int = MAX_CACHED) -> None:
        self._store = store
        # A plain dict kept in insertion order (oldest first); an OrderedDict's links cost
        # about as much again per session.
        self._cached: dict[str, SessionSettings] = {}
        self._size = size

    async def get(self, session: str) -> SessionSettings:
        found = self._cached.get(session)
        if found is None:
            choice = await self._store.session_choice(session)
            found = _settings(choice.model or None, choice.thinking or None)
            self._keep(session, found)
        return found

    async def choose(self, session: str, *, model: str | None = None,
                     thinking: str | None = None) -> SessionSettings:
        """Store a choice; None leaves that part as it was, "" clears it."""
        await self._store.choose_for_session(session, model=model, thinking=thinking)
        current = await self.get(session)
        chosen = _settings((model if model is not None else current.model) or None,
                           (thinking if thinking is not None else current.thinking) or None)
        self._keep(session, chosen)
        return chosen

    def _keep(self, session: str, settings: SessionSettings) -> None:
        self._cached.pop(session, None)  # to the newest end
        self._cached[session] = settings
        while len(self._cached) > self._size:
            del self._cached[next(iter(self._cached))]


def _settings(model: str | None, thinking: str | None) -> SessionSettings:
    if model is None and thinking is None:
        return NOTHING_CHOSEN
    return SessionSettings(model, thinking)
