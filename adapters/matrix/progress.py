"""What a room sees while its turn runs: the bot typing (renewed while the turn lasts) and,
with `matrix.stream`, the answer streamed into one message by throttled m.replace edits,
which the final answer then replaces (its first part is an edit of the draft).

The router calls in inline while it reads the agent's output, so every method returns at
once; homeserver calls run in tasks owned here. A delta only appends to the turn's DraftText
and marks the draft changed: the text is rendered when an edit is due, at most once per
interval, so many tiny deltas cost no more than a few edits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from mautrix.client import ClientAPI
from mautrix.errors import MatrixConnectionError, MatrixRequestError
from mautrix.types import EventID, RoomID

from picobridge.adapters.common import live
from picobridge.adapters.common.drafts import DraftQueue, DraftText
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.matrix.client import LimitExceeded
from picobridge.adapters.matrix.render import PART_BYTES, fits, message_content
from picobridge.adapters.matrix.send import edit_content, relation
from picobridge.contract import ChatRef, Outcome, OutgoingReply, ProgressEvent, ProgressKind

log = logging.getLogger("picobridge.matrix")

TYPING_MS = 30_000
TYPING_EVERY = 20.0
EDIT_INTERVAL = 1.5
DRAFT_CAP = PART_BYTES // 2
FAILURES = (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError, TimeoutError)

Put = Callable[[str, dict[str, Any]], Awaitable[str]]


def draft_markdown(text: str, more: bool) -> str:
    """The streamed text so far, cut to one message, marked as going on."""
    while text and not fits(text + " …"):
        text = text[: len(text) * 3 // 4]
    return text + " …" if more or text else text


class LiveMessage(live.LiveMessage[str, str]):
    """A message following `source()`; `message_id` is its event id."""

    FAILURES = FAILURES

    def __init__(self, put: Put, tasks: TaskSet, chat: ChatRef, reply_to: str | None,
                 direct: bool, source: Callable[[], str]) -> None:
        self._put = put
        self._chat = chat
        self._reply_to = reply_to
        self._direct = direct
        super().__init__(tasks, source, EDIT_INTERVAL, "matrix-live")

    @property
    def room(self) -> str:
        return self._chat.chat_id

    def render(self, text: str) -> str:
        return text

    def visible(self, view: str) -> bool:
        return bool(view.strip())

    def failed(self, exc: Exception, view: str) -> float | live.Then:
        if isinstance(exc, LimitExceeded):
            return exc.retry_after
        log.debug("streamed message not updated (%s)", exc.__class__.__name__)
        return EDIT_INTERVAL

    async def show(self, view: str) -> None:
        content = message_content(view)
        if self.message_id is None:
            rel = relation(self._chat, self._reply_to, self._direct)
            if rel is not None:
                content["m.relates_to"] = rel
            self.message_id = await self._put(self._chat.chat_id, content)
        else:
            await self._put(self._chat.chat_id, edit_content(self.message_id, content))


@dataclass(slots=True)
class _Turn:
    chat: ChatRef
    direct: bool
    message_ids: tuple[str, ...] = ()
    typing: asyncio.Task[None] | None = None
    text: DraftText = field(default_factory=lambda: DraftText(DRAFT_CAP))
    stream: LiveMessage | None = None

    def draft(self) -> str:
        return draft_markdown(self.text.text(), self.text.cut)


class Progress:
    def __init__(self, client: ClientAPI, put: Put, *, stream: bool,
                 typing_cap: float) -> None:
        self._client = client
        self._put = put
        self._stream = stream
        self._typing_cap = typing_cap
        self._turns: dict[str, _Turn] = {}
        self._tasks = TaskSet(log)
        self._drafts: DraftQueue[LiveMessage] = DraftQueue(self._tasks, self._discard)

    def event(self, chat: ChatRef, event: ProgressEvent, direct: bool) -> None:
        turn = self._turns.get(chat.key)
        if turn is None:
            turn = self._turns[chat.key] = _Turn(chat, direct)
        if event.message_ids:
            turn.message_ids = event.message_ids
        if turn.typing is None or turn.typing.done():
            turn.typing = self._tasks.spawn(self._typing(chat.chat_id),
                                            name=f"matrix-typing-{chat.key}")
        if event.kind is ProgressKind.TEXT and self._stream and event.text:
            version = turn.text.version
            turn.text.add(event.text)
            if turn.stream is None:
                reply_to = turn.message_ids[-1] if turn.message_ids else None
                turn.stream = LiveMessage(self._put, self._tasks, chat, reply_to, direct,
                                          turn.draft)
            if turn.text.version != version:
                turn.stream.changed()

    def clear(self, chat: ChatRef, outcome: Outcome) -> None:
        turn = self._turns.pop(chat.key, None)
        if turn is None:
            return
        if turn.typing is not None:
            turn.typing.cancel()
            self._tasks.spawn(self._not_typing(chat.chat_id), name="matrix-typing-off")
        if turn.stream is not None:
            turn.stream.close()
            if outcome is Outcome.REQUEUED:
                self._tasks.spawn(self._discard(turn.stream), name="matrix-draft-discard")
            else:
                self._drafts.add(chat.key, turn.message_ids, turn.stream)

    async def take_draft(self, chat: ChatRef, reply: OutgoingReply) -> str | None:
        live = self._drafts.take(chat.key, reply)
        return None if live is None else await live.finished()

    def settling(self, reply: OutgoingReply) -> contextlib.AbstractContextManager[None]:
        return self._drafts.settling(reply)

    async def _discard(self, live: LiveMessage) -> None:
        event_id = await live.finished()
        if event_id is None:
            return
        try:
            await self._client.redact(RoomID(live.room), EventID(event_id))
        except FAILURES as exc:
            log.debug("draft not removed (%s)", exc.__class__.__name__)

    async def _typing(self, room: str) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + self._typing_cap
        while loop.time() < end:
            try:
                await self._client.set_typing(RoomID(room), TYPING_MS)
            except LimitExceeded as exc:
                await asyncio.sleep(exc.retry_after)
                continue
            except FAILURES as exc:
                log.debug("typing failed in %s (%s)", room, exc.__class__.__name__)
            await asyncio.sleep(TYPING_EVERY)

    async def _not_typing(self, room: str) -> None:
        with contextlib.suppress(*FAILURES):
            await self._client.set_typing(RoomID(room), 0)

    async def close(self) -> None:
        await self._tasks.close()
        self._turns.clear()
        self._drafts.clear()

