"""Telegram's flood limits as a judge of the calls the fake took (their ``Call.time``): the
figures Telegram states for bots, independent of what the bridge was built with."""

from __future__ import annotations

from collections.abc import Iterable

# Messages a bot may send: overall, and into one group (or supergroup, or channel).
PER_SECOND = 30
PER_MINUTE_PER_GROUP = 20


def excess(times: Iterable[float], burst: float, per_second: float) -> float:
    """How many calls more than a leaky bucket holding ``burst`` and draining ``per_second``
    lets through, in the worst stretch of ``times`` (0 or less: within the limit). A sender
    pacing itself with such a bucket stays at or below 0 up to the jitter between its sending
    and the fake's receiving; one that does not pace itself exceeds it by its whole burst."""
    ordered = sorted(times)
    worst = float("-inf")
    for first, start in enumerate(ordered):
        for last in range(first, len(ordered)):
            calls = last - first + 1
            worst = max(worst, calls - burst - per_second * (ordered[last] - start))
    return worst
