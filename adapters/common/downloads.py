"""A file download retried as every platform retries it: a few attempts with a doubling pause
for failures that may pass (5xx, 429, the network), then a message the person can act on."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from picobridge.adapters.common.attachments import AttachmentRefused
from picobridge.adapters.common.backoff import Backoff

T = TypeVar("T")

ATTEMPTS = 3
RETRY_DELAY = 0.5  # doubled after each failed attempt


class TransientDownloadError(Exception):
    """The file host failed in a way that may pass (5xx, 429, network); the message names
    the failure (an HTTP status, an exception's class), never a URL."""


async def with_retries(download: Callable[[], Awaitable[T]], name: str, source: str,
                       log: logging.Logger, *,
                       transient: tuple[type[Exception], ...] = (TransientDownloadError,),
                       attempts: int = ATTEMPTS, delay: float | None = None) -> T:
    """`download()`, tried again after a `transient` failure; `source` ("Slack") says where
    the file of that `name` comes from."""
    backoff = Backoff(RETRY_DELAY if delay is None else delay)
    for attempt in range(1, attempts + 1):
        try:
            return await download()
        except transient as exc:
            # Only our own messages are logged: a library's may carry a signed URL.
            reason = str(exc) if isinstance(exc, TransientDownloadError) else ""
            log.warning("download of a %s file failed (attempt %d/%d): %s", source, attempt,
                        attempts, reason or exc.__class__.__name__)
            if attempt == attempts:
                break
            await backoff.wait()
    raise AttachmentRefused(f"I could not download {name!r} from {source} right now; please "
                            "send it again in a moment.")
