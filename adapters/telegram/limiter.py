"""Telegram's flood limits, kept on our side of the wire (telegram.rate_limiter).

The same limits as python-telegram-bot's AIORateLimiter, with the same leaky buckets
(aiolimiter), but on the bot's request path instead of through telegram.ext's ExtBot: that
package would load all of PTB's application framework (Application, handlers, the job queue:
about 3 MB resident) for this one class. Every call naming a chat takes its turn in the bot's
30 a second; one naming a group, supergroup or channel (a negative id, or an @username, which
cannot be told from a group's) first takes its turn in that chat's 20 a minute. Calls that
name no chat (getMe, getFile, downloads...) and getUpdates (its own request) are not held.

A 429 is not retried here (AIORateLimiter with max_retries=0 did not either): the send paths
and the outbox wait out Telegram's retry_after themselves, in order, and count it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from telegram._utils.types import ODVInput
from telegram.constants import FloodLimit
from telegram.request import BaseRequest, RequestData

if TYPE_CHECKING:
    from aiolimiter import AsyncLimiter

# (calls, seconds): Telegram's limits as PTB states them.
OVERALL = (FloodLimit.MESSAGES_PER_SECOND, 1.0)
PER_GROUP = (FloodLimit.MESSAGES_PER_MINUTE_PER_GROUP, 60.0)
# Beyond this many groups the drained buckets are dropped (a drained bucket is a new one), so
# the buckets grow with the groups written to in the last minute, not with every group ever.
KEPT_GROUPS = 512


def leaky_bucket(rate: tuple[float, float]) -> AsyncLimiter:
    """A leaky bucket of `rate` (calls, seconds). aiolimiter is imported by the first call
    that takes a turn, not by an idle daemon: importing it reads its package's metadata,
    which brings importlib.metadata, zipfile and csv (about 0.8 MB resident)."""
    from aiolimiter import AsyncLimiter

    return AsyncLimiter(*rate)


class FloodLimits:
    def __init__(self, overall: tuple[float, float] = OVERALL,
                 per_group: tuple[float, float] = PER_GROUP) -> None:
        self._overall_rate = overall
        self._overall: AsyncLimiter | None = None  # made by the first call naming a chat
        self._per_group = per_group
        self._groups: dict[int | str, AsyncLimiter] = {}

    @property
    def groups(self) -> int:
        """How many groups' buckets are kept."""
        return len(self._groups)

    async def wait(self, chat_id: object) -> None:
        """Returns when a call naming `chat_id` (None: no chat) may go out."""
        if chat_id is None:
            return
        group = group_of(chat_id)
        if group is not None:
            await self._group(group).acquire()
        if self._overall is None:
            self._overall = leaky_bucket(self._overall_rate)
        await self._overall.acquire()

    def _group(self, group: int | str) -> AsyncLimiter:
        bucket = self._groups.get(group)
        if bucket is None:
            if len(self._groups) >= KEPT_GROUPS:
                self._groups = {key: kept for key, kept in self._groups.items()
                                if not kept.has_capacity(kept.max_rate)}
            bucket = self._groups[group] = leaky_bucket(self._per_group)
        return bucket


def group_of(chat_id: object) -> int | str | None:
    """The group a call's chat_id names, or None for a private chat: Telegram gives users
    positive ids and groups, supergroups and channels negative ones; an @username is taken
    for a group (a channel or supergroup; a private chat cannot be named that way)."""
    if isinstance(chat_id, str):
        try:
            chat_id = int(chat_id)
        except ValueError:
            return chat_id
    return chat_id if isinstance(chat_id, int) and chat_id < 0 else None


class LimitedRequest(BaseRequest):
    """A transport (ours on aiohttp, or PTB's httpx one) whose calls wait for their turn."""

    def __init__(self, inner: BaseRequest, limits: FloodLimits) -> None:
        self._inner = inner
        self._limits = limits

    @property
    def read_timeout(self) -> float | None:
        return self._inner.read_timeout

    async def initialize(self) -> None:
        await self._inner.initialize()

    async def shutdown(self) -> None:
        await self._inner.shutdown()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if request_data is not None:
            await self._limits.wait(request_data.parameters.get("chat_id"))
        return await self._inner.do_request(url, method, request_data, read_timeout,
                                            write_timeout, connect_timeout, pool_timeout)
