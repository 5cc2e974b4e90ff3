"""Small helpers for handling python-telegram-bot's errors the same way everywhere."""

from __future__ import annotations

import asyncio
import warnings
from datetime import timedelta

from telegram.error import RetryAfter
from telegram.warnings import PTBDeprecationWarning

# python-telegram-bot 22 warns, from RetryAfter's own constructor, that `retry_after` becomes
# a timedelta in its next major version (unless PTB_TIMEDELTA is set). retry_seconds takes
# both forms, so the warning would only put a scary line in the operator's log on every 429.
warnings.filterwarnings("ignore", message=r".*`retry_after` will be of type",
                        category=PTBDeprecationWarning)


def retry_seconds(exc: RetryAfter) -> float:
    value = exc.retry_after
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return max(0.0, seconds)


def check_cancelled() -> None:
    """Re-raise a cancellation that the HTTP stack turned into an error.

    httpx (through anyio) can report the cancellation of a task that waits for a response as
    a ReadError, which python-telegram-bot passes on as NetworkError. A loop that retries on
    NetworkError would then outlive `stop()`; call this first in such an except branch.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
