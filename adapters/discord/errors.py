"""discord.py's failures as the bridge's DeliveryError.

discord.py waits out 429s itself (the `retry_after` of the body, per route bucket, and the
global limit for every route) and retries 500/502/504 a few times; the outbox sends a chat's
replies one at a time, so a reply waiting out a limit is never overtaken by a later one.
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import discord

from picobridge.contract import DeliveryError

# Discord's JSON error codes that a retry will not change (unknown channel or message,
# missing access or permissions, cannot DM the user, invalid form body, ...).
PERMANENT_CODES = frozenset({10003, 10004, 10008, 10013, 50001, 50007, 50008, 50013, 50035,
                             50006, 160005})


def delivery_error(exc: BaseException, on_auth_failure: Callable[[str], None]) -> DeliveryError:
    if isinstance(exc, discord.RateLimited):
        return DeliveryError("rate limited by Discord", retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        status, code = exc.status, exc.code
        if status == 401:
            on_auth_failure("401 Unauthorized")
            return DeliveryError("Discord refused the bot token (401)")
        if status == 429:
            return DeliveryError("rate limited by Discord", retry_after=1.0)
        if status >= 500:
            return DeliveryError(f"Discord server error {status}")
        if code in PERMANENT_CODES or status in (400, 403, 404):
            return DeliveryError(f"Discord refused the message: {status} (code {code})",
                                 permanent=True)
        return DeliveryError(f"Discord error {status} (code {code})")
    if isinstance(exc, aiohttp.ClientError | TimeoutError | OSError):
        return DeliveryError(f"network error talking to Discord: {exc.__class__.__name__}")
    raise exc
