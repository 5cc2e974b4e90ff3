"""Settings of a shape their platform never has, judged by each platform's own rules
(adapters/<platform>/platform.py): an allowed user id that can never match would let nobody
in silently, a token that cannot work would cost a round trip to learn it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from picobridge.contract import Platform


def shape_problems(platforms: Mapping[str, Platform],
                   section: Callable[[str], Any]) -> list[str]:
    """One plain sentence per problem, naming the key; never a token's value."""
    problems = []
    for name, platform in platforms.items():
        problems += _duplicate_bots(platform, section(name))
        for bot, values in platform.bots(section(name)).items():
            where = name if bot == name else f"{name}.{platform.bots_key}[{values.name}]"
            problems += [p if bot == name else f"{where}: {p}"
                         for p in platform.token_problems(values)]
            for user in sorted(platform.allowed_users(values)):
                problem = platform.user_id_problem(user)
                if problem is not None:
                    problems.append(f"{where}.allowed_users: {problem}, got {user!r}")
    return problems


def _duplicate_bots(platform: Platform, values: Any) -> list[str]:
    names = [entry.name for entry in getattr(values, platform.bots_key or "", ())]
    return [f"{platform.name}.{platform.bots_key}: the name {name!r} is used more than once"
            for name in sorted({n for n in names if names.count(n) > 1})]
