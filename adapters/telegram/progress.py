"""What a chat sees while its turn runs: "typing…" renewed every 4 s, optionally the answer
streamed into a message by throttled edits, optionally a short status of the tools in use.

The router calls in inline while it reads the agent's output, so every method here returns at
once; the Bot API calls run in tasks owned by `ProgressDisplay`. A streamed delta only appends
to the turn's `DraftText` and marks its message changed: the text is joined and rendered when
an edit is due, at most once per edit interval, so a stream of many tiny deltas costs time in
proportion to their number and no other chat waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from telegram import Bot, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

from picobridge.adapters.common import live
from picobridge.adapters.common.drafts import DraftQueue, DraftText
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.render import TelegramChunk, render_telegram, utf16_len
from picobridge.adapters.telegram.send import LIMIT, Target, quote
from picobridge.contract import ChatRef, Outcome, OutgoingReply, ProgressEvent, ProgressKind

log = logging.getLogger("picobridge.telegram")

# Telegram shows a chat action for 5 s or until the bot's next message.
TYPING_EVERY = 4.0
# An answer that comes this fast is its own progress signal; not sending "typing" for it
# halves the Bot API calls of quick turns.
TYPING_GRACE = 0.5
# Telegram allows about one message a second per chat and twenty a minute per group.
EDIT_INTERVAL_PRIVATE = 1.0
EDIT_INTERVAL_GROUP = 3.0
MAX_TOOLS_SHOWN = 3
# Streamed text kept for a draft: a draft shows one message (LIMIT UTF-16 units, at most as
# many characters) of the rendered answer, and Markdown markup takes room in the source.
DRAFT_CAP = 2 * LIMIT


def visible(text: str, limit: int = LIMIT) -> str:
    """`text` cut to fit one message (UTF-16 units), marked when cut."""
    if utf16_len(text) <= limit:
        return text
    cut = text[: limit - 2]
    while utf16_len(cut) > limit - 2:
        cut = cut[:-1]
    return cut + " …"


def draft(markdown: str, more: bool = False) -> TelegramChunk:
    """Streamed Markdown so far, rendered like the answer will be, cut to one message and
    marked as going on when it was cut (or `more` of it was not kept)."""
    chunks = render_telegram(markdown, LIMIT - 2)
    if not chunks:
        return TelegramChunk("", ())
    first = chunks[0]
    return TelegramChunk(first.text + " …", first.entities) if len(chunks) > 1 or more \
        else first


def plain(text: str) -> TelegramChunk:
    return TelegramChunk(visible(text), ())


class LiveMessage(live.LiveMessage[TelegramChunk, int]):
    """A message following `source()`, rendered by `render` (plain text unless told)."""

    FAILURES = (TelegramError,)

    def __init__(self, bot: Bot, tasks: TaskSet, target: Target,
                 reply: ReplyParameters | None, interval: float, scrub: Callable[[str], str],
                 source: Callable[[], str],
                 render: Callable[[str], TelegramChunk] = plain) -> None:
        self._bot = bot
        self._target = target
        self._reply = reply
        self._scrub = scrub
        self._render = render
        super().__init__(tasks, source, interval, "telegram-live")

    def render(self, text: str) -> TelegramChunk:
        return self._render(text)

    def visible(self, view: TelegramChunk) -> bool:
        return bool(view.text.strip())

    def failed(self, exc: Exception, view: TelegramChunk) -> float | live.Then:
        if isinstance(exc, RetryAfter):
            return retry_seconds(exc)
        if isinstance(exc, BadRequest):
            if view.entities and self._render is not plain:
                # Formatting refused: the rest of this draft goes as plain text.
                self._render = plain
                return 0.0
            if "not modified" in exc.message.lower():
                return live.Then.SHOWN
            log.debug("live message stopped: %s", self._scrub(exc.message))
            return live.Then.STOP
        check_cancelled()
        log.debug("live message update failed: %s", self._scrub(str(exc)))
        return self._interval

    async def show(self, view: TelegramChunk) -> None:
        entities = view.entities or None
        if self.message_id is None:
            sent = await self._bot.send_message(
                self._target.chat_id, view.text, entities=entities,
                message_thread_id=self._target.thread, reply_parameters=self._reply)
            self.message_id = sent.message_id
        else:
            await self._bot.edit_message_text(
                view.text, chat_id=self._target.chat_id, message_id=self.message_id,
                entities=entities)

    async def delete(self) -> None:
        self.close()
        message_id = await self.finished()
        if message_id is None:
            return
        try:
            await self._bot.delete_message(self._target.chat_id, message_id)
        except TelegramError as exc:
            log.debug("could not delete status message: %s", self._scrub(str(exc)))


@dataclass(slots=True)
class _Turn:
    target: Target
    private: bool
    reply: ReplyParameters | None = None
    message_ids: tuple[str, ...] = ()
    typing: asyncio.Task[None] | None = None
    text: DraftText = field(default_factory=lambda: DraftText(DRAFT_CAP))
    stream: LiveMessage | None = None
    tools: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_TOOLS_SHOWN))
    status: LiveMessage | None = None

    def draft(self, markdown: str) -> TelegramChunk:
        return draft(markdown, more=self.text.cut)

    def tools_line(self) -> str:
        return f"🔧 {', '.join(self.tools)}…"


class ProgressDisplay:
    def __init__(self, bot: Bot, action_bot: Bot, *, stream: bool, show_tools: bool,
                 typing_cap: float, scrub: Callable[[str], str]) -> None:
        self._bot = bot
        self._action_bot = action_bot
        self._stream = stream
        self._show_tools = show_tools
        self._typing_cap = typing_cap
        self._scrub = scrub
        self._turns: dict[str, _Turn] = {}
        self._tasks = TaskSet(log)
        # Streamed drafts of finished turns, each waiting to become its own answer.
        self._drafts: DraftQueue[LiveMessage] = DraftQueue(self._tasks, LiveMessage.delete)

    def event(self, chat: ChatRef, event: ProgressEvent) -> None:
        turn = self._turns.get(chat.key)
        if turn is None:
            target = Target.of(chat)
            turn = self._turns[chat.key] = _Turn(target, target.chat_id > 0)
        if event.message_ids and event.message_ids != turn.message_ids:
            turn.reply = quote(event.message_ids[-1])
            turn.message_ids = event.message_ids
        if turn.typing is None or turn.typing.done():
            turn.typing = self._tasks.spawn(self._typing(turn.target),
                                            name=f"telegram-typing-{chat.key}")
        if event.kind is ProgressKind.TEXT and self._stream and event.text:
            version = turn.text.version
            turn.text.add(event.text)
            if turn.stream is None:
                turn.stream = self._live(turn, turn.text.text, turn.draft)
            if turn.text.version != version:
                turn.stream.changed()
        elif event.kind is ProgressKind.TOOL_START and self._show_tools and event.tool:
            turn.tools.append(event.tool)
            if turn.status is None:
                turn.status = self._live(turn, turn.tools_line)
            turn.status.changed()

    def clear(self, chat: ChatRef, outcome: Outcome) -> None:
        turn = self._turns.pop(chat.key, None)
        if turn is None:
            return
        if turn.typing is not None:
            turn.typing.cancel()
        if turn.status is not None:
            self._tasks.spawn(turn.status.delete(), name=f"telegram-status-{chat.key}")
        if turn.stream is not None:
            if outcome is Outcome.REQUEUED:
                # The turn runs again from the start; this draft would only confuse.
                self._tasks.spawn(turn.stream.delete(), name=f"telegram-draft-{chat.key}")
            else:
                turn.stream.close()
                self._drafts.add(chat.key, turn.message_ids, turn.stream)

    def stop_typing(self, chat: ChatRef) -> None:
        turn = self._turns.get(chat.key)
        if turn is not None and turn.typing is not None:
            turn.typing.cancel()

    async def take_draft(self, chat: ChatRef, reply: OutgoingReply) -> int | None:
        """The streamed message of the turn `reply` answers, for the reply to replace."""
        live = self._drafts.take(chat.key, reply)
        return None if live is None else await live.finished()

    def settling(self, reply: OutgoingReply) -> contextlib.AbstractContextManager[None]:
        """Around sending `reply`: its draft is forgotten once it is delivered (or refused
        for good), and kept for a retry otherwise."""
        return self._drafts.settling(reply)

    async def close(self) -> None:
        # Every typing loop, live message and clean-up call runs in the task set.
        await self._tasks.close()
        self._turns.clear()
        self._drafts.clear()

    def _live(self, turn: _Turn, source: Callable[[], str],
              render: Callable[[str], TelegramChunk] = plain) -> LiveMessage:
        interval = EDIT_INTERVAL_PRIVATE if turn.private else EDIT_INTERVAL_GROUP
        return LiveMessage(self._bot, self._tasks, turn.target, turn.reply, interval,
                           self._scrub, source, render)

    async def _typing(self, target: Target) -> None:
        loop = asyncio.get_running_loop()
        # A turn the router forgot to clear must not type forever.
        end = loop.time() + self._typing_cap
        await asyncio.sleep(TYPING_GRACE)
        while loop.time() < end:
            try:
                await self._action_bot.send_chat_action(
                    target.chat_id, ChatAction.TYPING, message_thread_id=target.thread)
            except RetryAfter as exc:
                await asyncio.sleep(retry_seconds(exc))
                continue
            except (Forbidden, BadRequest) as exc:
                log.debug("typing stopped in %d: %s", target.chat_id, self._scrub(exc.message))
                return
            except TelegramError as exc:
                check_cancelled()
                log.debug("typing failed in %d: %s", target.chat_id, self._scrub(str(exc)))
            await asyncio.sleep(TYPING_EVERY)
