"""Who may talk to the agent: the config's allow lists plus the operator's grants and denials
in the store (`picobridge access ...`), which take effect without a restart."""

from __future__ import annotations

from collections.abc import Mapping, Set

from picobridge.store import Store

# Platforms whose user is the operator at the console: always allowed.
TRUSTED_PLATFORMS = frozenset({"console"})
MAX_CACHED = 100_000


class AccessPolicy:
    def __init__(self, store: Store, allow_lists: Mapping[str, Set[str]]) -> None:
        self._store = store
        self._allow = allow_lists
        # Decisions cached until any grant changes (see Store.access_stamp), by platform and
        # user id (one dict per platform: no key tuple kept per user).
        self._cache: dict[str, dict[str, bool]] = {}
        self._stamp = store.access_stamp()

    async def allowed(self, platform: str, user_id: str) -> bool:
        if platform in TRUSTED_PLATFORMS:
            return True
        stamp = self._store.access_stamp()
        if stamp != self._stamp:
            self._cache.clear()
            self._stamp = stamp
        known = self._cache.get(platform)
        cached = known.get(user_id) if known is not None else None
        if cached is not None:
            return cached
        decision = await self._store.access_decision(platform, user_id)
        if decision is None:
            decision = user_id in self._allow.get(platform, frozenset())
        if sum(map(len, self._cache.values())) > MAX_CACHED:
            self._cache.clear()  # strangers must not grow memory without bound
        self._cache.setdefault(platform, {})[user_id] = decision
        return decision

    async def should_tell(self, platform: str, user_id: str) -> bool:
        """True the first time a stranger writes, so they hear why once, not every time."""
        return await self._store.first_denial(platform, user_id)


def denial_text(platform: str, user_id: str) -> str:
    return (
        f"Sorry, this bot only talks to people its operator has allowed.\n"
        f"Your {platform} user id is `{user_id}`. The operator can let you in with:\n"
        f"`picobridge access allow {platform}:{user_id}`"
    )
