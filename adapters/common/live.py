"""A message that follows a changing text (a streamed answer, a status line): sent once, then
edited, at most once per interval, each platform saying how it sends, edits and fails.

`changed()` only marks an edit as due (one pending edit, whatever changed since: the latest
text wins); the source is read and rendered when the edit is made, so a fast stream costs one
render per edit, not one per delta.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

from picobridge.adapters.common.tasks import TaskSet

V = TypeVar("V")  # what is shown: the platform's rendering of the text
M = TypeVar("M")  # the platform's id of the message


class Then(enum.Enum):
    """What a failed show leads to, besides retrying after some seconds."""

    SHOWN = "shown"  # the platform already shows it (Telegram's "not modified")
    STOP = "stop"  # the message cannot be edited any more


class LiveMessage(Generic[V, M]):
    """Subclasses send the first view (`show` with `message_id` None), edit it after, and
    map their platform's failures (`FAILURES`) to a pause before the next try or a `Then`."""

    FAILURES: ClassVar[tuple[type[Exception], ...]] = ()

    def __init__(self, tasks: TaskSet, source: Callable[[], str], interval: float,
                 name: str) -> None:
        self._source = source
        self._interval = interval
        self._shown: V | None = None
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self.message_id: M | None = None
        self.task = tasks.spawn(self._run(), name=name)

    def render(self, text: str) -> V:
        raise NotImplementedError

    def visible(self, view: V) -> bool:
        """Whether the view has anything to show (an empty message cannot be sent)."""
        raise NotImplementedError

    async def show(self, view: V) -> None:
        """Send the view as the message, or edit the message sent before into it."""
        raise NotImplementedError

    def failed(self, exc: Exception, view: V) -> float | Then:
        """Seconds to wait before showing the latest text again, or what else to do."""
        raise NotImplementedError

    def changed(self) -> None:
        self._wake.set()

    def close(self) -> None:
        """Stop editing; a call in progress completes, so `message_id` is then final."""
        self._closed.set()
        self._wake.set()

    async def finished(self, timeout: float = 10.0) -> M | None:
        await asyncio.wait([self.task], timeout=timeout)
        return self.message_id

    async def _run(self) -> None:
        while not self._closed.is_set():
            await self._wake.wait()
            self._wake.clear()
            if self._closed.is_set():
                continue
            view = self.render(self._source())
            if not self.visible(view) or view == self._shown:
                continue
            try:
                await self.show(view)
            except self.FAILURES as exc:
                then = self.failed(exc, view)
                if then is Then.STOP:
                    return
                if then is not Then.SHOWN:
                    await self._pause(then)
                    self._wake.set()
                    continue
            self._shown = view
            await self._pause(self._interval)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closed.wait()
