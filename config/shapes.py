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
        values = section(name)
        problems += platform.token_problems(values)
        for user in sorted(platform.allowed_users(values)):
            problem = platform.user_id_problem(user)
            if problem is not None:
                problems.append(f"{name}.allowed_users: {problem}, got {user!r}")
    return problems
