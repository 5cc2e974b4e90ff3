"""Small helpers for handling python-telegram-bot's errors the same way everywhere."""

from __future__ import annotations

import asyncio

from telegram.error import RetryAfter


def retry_seconds(exc: RetryAfter) -> float:
    # `_retry_after` is always a timedelta; the public property warns or converts
    # depending on an environment variable.
    return max(0.0, exc._retry_after.total_seconds())


def check_cancelled() -> None:
    """Re-raise a cancellation that the HTTP stack turned into an error.

    httpx (through anyio) can report the cancellation of a task that waits for a response as
    a ReadError, which python-telegram-bot passes on as NetworkError. A loop that retries on
    NetworkError would then outlive `stop()`; call this first in such an except branch.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
