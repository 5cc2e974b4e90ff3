"""Which named agent serves a message: the chat's own choice (/agent), else the first route
that matches, else `bridge.default_agent`.

A route matches on the platform and bot (a bot is the part after `@` in the name the bridge
knows a platform by, see contract/names.py), the chat key (glob patterns), the sender and the
kind of chat; a criterion left out matches everything. A chat's choice holds only while its
route still lets it switch to that agent: take it out of `switchable` and the chat is back on
its route's agent.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from picobridge.contract import ChatRef, split_platform


@dataclass(frozen=True, slots=True)
class Route:
    agent: str
    platform: str | None = None
    bot: str | None = None
    chats: tuple[str, ...] | None = None
    users: frozenset[str] | None = None
    kind: str | None = None
    switchable: tuple[str, ...] = ()

    def matches(self, chat: ChatRef, user: str | None, kind: str | None) -> bool:
        platform, bot = split_platform(chat.platform)
        if self.platform is not None and self.platform != platform:
            return False
        if self.bot is not None and self.bot != bot:
            return False
        if self.chats is not None and not any(fnmatch.fnmatchcase(chat.key, pattern)
                                              for pattern in self.chats):
            return False
        if self.users is not None and (user is None or user not in self.users):
            return False
        return self.kind is None or self.kind == kind

    @property
    def choices(self) -> tuple[str, ...]:
        """The agents a chat of this route may talk to: its own first, then the others."""
        return (self.agent, *(a for a in self.switchable if a != self.agent))

    def may_serve(self, platform: str, kind: str | None = None) -> bool:
        """Whether some chat of the bot `platform` (`chat@work`), of `kind` if given, may
        match this route."""
        name, bot = split_platform(platform)
        platforms, bots = self._platforms(0), self._platforms(1)
        return (platforms is None or name in platforms) and (bots is None or bot in bots) \
            and (kind is None or self.kind is None or self.kind == kind)

    def takes_all(self, platform: str, kind: str | None = None) -> bool:
        """Whether every chat of the bot `platform` (of `kind` if given) matches this route."""
        return self.may_serve(platform, kind) and self.chats is None and self.users is None \
            and (self.kind is None or self.kind == kind)

    def covers(self, other: Route) -> bool:
        """Whether every chat `other` matches is matched by this route first (so `other`,
        coming later, can never match). Globs are compared as patterns: a later pattern is
        covered when an earlier pattern matches it as text (`chat:*` covers `chat:-1*`).
        """
        def within(mine: Iterable[str] | None, theirs: Iterable[str] | None) -> bool:
            if mine is None:
                return True
            return theirs is not None and set(theirs) <= set(mine)

        if self.chats is not None and (other.chats is None or not all(
                any(fnmatch.fnmatchcase(p, q) for q in self.chats) for p in other.chats)):
            return False
        return (within(_one(self.platform), other._platforms(0))
                and within(_one(self.bot), other._platforms(1))
                and within(self.users, other.users)
                and within(_one(self.kind), _one(other.kind)))

    def _platforms(self, part: int) -> tuple[str, ...] | None:
        """The platforms (part 0) or bots (part 1) this route can match: its own criterion,
        else what its chat keys spell out (`chat@work:42` can only be platform `chat`)."""
        given = self.platform if part == 0 else self.bot
        if given is not None:
            return (given,)
        if self.chats is None:
            return None
        prefixes = [pattern.partition(":")[0] for pattern in self.chats]
        if any(":" not in p or any(c in prefix for c in "*?[")
               for p, prefix in zip(self.chats, prefixes, strict=True)):
            return None
        return tuple(split_platform(prefix)[part] for prefix in prefixes)


def _one(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else (value,)


class Routing:
    def __init__(self, routes: Sequence[Route], default_agent: str,
                 chosen: Mapping[str, str] | None = None) -> None:
        self._routes = list(routes)
        self._default = Route(default_agent)
        self._chosen = dict(chosen or {})  # chat key -> agent chosen there with /agent

    @property
    def routes(self) -> list[Route]:
        return list(self._routes)

    @property
    def default_agent(self) -> str:
        """The agent of chats no route names (`bridge.default_agent`)."""
        return self._default.agent

    def route(self, chat: ChatRef, user: str | None = None, kind: str | None = None) -> Route:
        return next((r for r in self._routes if r.matches(chat, user, kind)), self._default)

    def agent_for(self, chat: ChatRef, user: str | None = None, kind: str | None = None) -> str:
        route = self.route(chat, user, kind)
        chosen = self._chosen.get(chat.key)
        return chosen if chosen is not None and chosen in route.choices else route.agent

    def reachable(self, platform: str, kind: str | None = None) -> tuple[str, ...]:
        """The agents chats of the bot `platform` (of `kind` if given: "private", "group")
        may talk to, by a route or a switch; the one of its first route first."""
        found: dict[str, None] = {}
        for route in [*self._routes, self._default]:
            if route.may_serve(platform, kind):
                found.update(dict.fromkeys(route.choices))
                if route.takes_all(platform, kind):
                    break
        return tuple(found)

    def bot_agent(self, platform: str) -> str:
        """The agent of the first route that takes every chat of the bot `platform`: the one
        its chats talk to unless an earlier route or a switch says otherwise."""
        return next(r for r in [*self._routes, self._default] if r.takes_all(platform)).agent

    def choose(self, chat: ChatRef, agent: str | None) -> None:
        if agent is None:
            self._chosen.pop(chat.key, None)
        else:
            self._chosen[chat.key] = agent


def shadowed(routes: Sequence[Route]) -> list[tuple[int, int]]:
    """(later, earlier) index pairs: route `later` can never match, `earlier` takes its chats."""
    found = []
    for j, later in enumerate(routes):
        earlier = next((i for i in range(j) if routes[i].covers(later)), None)
        if earlier is not None:
            found.append((j, earlier))
    return found
