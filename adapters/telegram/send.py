"""Delivering replies to Telegram: Markdown rendered to text + entities (never parse_mode, so
nothing can fail to parse), split at 4096 UTF-16 units without breaking code blocks, a long
reply as a short head plus a .md file, and Bot API errors mapped to `DeliveryError`."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from telegram import Bot, ReplyParameters
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from picobridge.adapters.common.textsplit import iter_split_markdown
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.render import (
    TelegramChunk,
    needs_file,
    plain_chunks,
    render_telegram,
)
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply

log = logging.getLogger("picobridge.telegram")

LIMIT = 4096
HEAD_CHARS = 1200
FILE_NAME = "reply.md"
FILE_NOTE = "\n\n📎 The whole reply is in the attached file."
EMPTY_REPLY = "(The agent sent an empty reply.)"
# Replies that failed half way and will be retried, remembered per process (bounded: a reply
# the outbox gives up on is dropped from here too, this only caps odd leftovers).
MAX_PARTIAL = 512


@dataclass(frozen=True, slots=True)
class Target:
    chat_id: int
    thread: int | None

    @classmethod
    def of(cls, chat: ChatRef) -> Target:
        return cls(int(chat.chat_id), int(chat.thread_id) if chat.thread_id else None)


@dataclass(frozen=True, slots=True)
class TextStep:
    chunk: TelegramChunk


@dataclass(frozen=True, slots=True)
class FileStep:
    markdown: str


Step = TextStep | FileStep


@dataclass(slots=True)
class _Partial:
    done: set[str] = field(default_factory=set)
    edit: int | None = None


def plan(markdown: str, max_chunks: int) -> list[Step]:
    """The messages one reply becomes; deterministic, so a retry can skip what was sent."""
    if not markdown.strip():
        return [TextStep(TelegramChunk(EMPTY_REPLY, ()))]
    # Rendering everything of a huge reply only to count its chunks would be wasted work;
    # needs_file stops early. Below that size, rendering once answers both questions.
    if len(markdown) > LIMIT * (max_chunks + 1) and needs_file(markdown, LIMIT, max_chunks):
        return [TextStep(head(markdown)), FileStep(markdown)]
    chunks = render_telegram(markdown, LIMIT)
    if len(chunks) > max_chunks:
        return [TextStep(head(markdown)), FileStep(markdown)]
    return [TextStep(c) for c in chunks] or [TextStep(TelegramChunk(EMPTY_REPLY, ()))]


def head(markdown: str) -> TelegramChunk:
    """The opening of a long reply, cut at a block boundary, with a pointer to the file."""
    piece = next(iter_split_markdown(markdown, lambda p: len(p) <= HEAD_CHARS), "")
    rendered = render_telegram(piece, LIMIT - len(FILE_NOTE) * 2) if piece.strip() else []
    first = rendered[0] if rendered else TelegramChunk("", ())
    return TelegramChunk((first.text + FILE_NOTE).strip(), first.entities)


def quote(reply_to: str | None) -> ReplyParameters | None:
    if reply_to is None or not reply_to.isdigit():
        return None
    # The user may have deleted their message meanwhile; the answer must still arrive.
    return ReplyParameters(message_id=int(reply_to), allow_sending_without_reply=True)


def _formatting_refused(exc: BadRequest) -> bool:
    text = exc.message.lower()
    return "entit" in text or "parse" in text or "too long" in text


class Sender:
    def __init__(self, bot: Bot, *, max_chunks: int, scrub: Callable[[str], str],
                 on_revoked: Callable[[], None]) -> None:
        self._bot = bot
        self._max_chunks = max_chunks
        self._scrub = scrub
        self._on_revoked = on_revoked
        self._partial: OrderedDict[tuple[object, ...], _Partial] = OrderedDict()

    async def send(self, chat: ChatRef, reply: OutgoingReply, *, edit: int | None = None) -> None:
        """Deliver `reply`; when `edit` is a streamed message of this turn, it becomes the first
        part. A retry after a failure resends only what did not arrive."""
        key = (chat.key, reply.kind, reply.text, reply.answers, reply.reply_to)
        partial = self._partial.get(key)
        if partial is None:
            partial = self._partial[key] = _Partial(edit=edit)
            while len(self._partial) > MAX_PARTIAL:
                self._partial.popitem(last=False)
        try:
            await self._deliver(Target.of(chat), reply, partial)
        except DeliveryError as exc:
            if exc.permanent:
                self._partial.pop(key, None)
            raise
        self._partial.pop(key, None)

    async def _deliver(self, target: Target, reply: OutgoingReply, partial: _Partial) -> None:
        steps = plan(reply.text, self._max_chunks)
        for index, step in enumerate(steps):
            step_id = str(index)
            if step_id in partial.done:
                continue
            reply_params = quote(reply.reply_to) if index == 0 else None
            try:
                try:
                    await self._step(target, step, step_id, reply_params, partial)
                except ChatMigrated as exc:
                    # The group became a supergroup; this reply still belongs there.
                    target = Target(int(exc.new_chat_id), None)
                    await self._step(target, step, step_id, reply_params, partial)
            except TelegramError as exc:
                check_cancelled()
                raise self._delivery_error(exc) from None
            partial.done.add(step_id)

    async def _step(self, target: Target, step: Step, step_id: str,
                    reply_params: ReplyParameters | None, partial: _Partial) -> None:
        if isinstance(step, FileStep):
            await self._bot.send_document(
                target.chat_id, document=step.markdown.encode("utf-8"), filename=FILE_NAME,
                message_thread_id=target.thread, reply_parameters=reply_params)
            return
        chunk = step.chunk
        if step_id == "0" and partial.edit is not None:
            if await self._edit(target, partial.edit, chunk):
                return
            partial.edit = None
        if any(done.startswith(f"{step_id}.") for done in partial.done):
            # Half sent as plain text before: carry on that way, never repeat a part.
            await self._plain(target, chunk.text, step_id, reply_params, partial)
            return
        try:
            await self._bot.send_message(
                target.chat_id, chunk.text, entities=chunk.entities or None,
                message_thread_id=target.thread, reply_parameters=reply_params)
        except BadRequest as exc:
            if not _formatting_refused(exc):
                raise
            log.warning("Telegram refused a formatted message (%s); sending it as plain text",
                        self._scrub(exc.message))
            await self._plain(target, chunk.text, step_id, reply_params, partial)

    async def _plain(self, target: Target, text: str, step_id: str,
                     reply_params: ReplyParameters | None, partial: _Partial) -> None:
        for number, part in enumerate(plain_chunks(text, LIMIT)):
            part_id = f"{step_id}.{number}"
            if part_id in partial.done:
                continue
            await self._bot.send_message(
                target.chat_id, part, message_thread_id=target.thread,
                reply_parameters=reply_params if number == 0 else None)
            partial.done.add(part_id)

    async def _edit(self, target: Target, message_id: int, chunk: TelegramChunk) -> bool:
        """Turn the streamed draft into the first part of the answer; False: send instead."""
        try:
            await self._bot.edit_message_text(
                chunk.text, chat_id=target.chat_id, message_id=message_id,
                entities=chunk.entities or None)
        except BadRequest as exc:
            if "not modified" in exc.message.lower():
                return True
            log.info("streamed message %d not replaced (%s); sending the answer anew",
                     message_id, self._scrub(exc.message))
            return False
        return True

    def _delivery_error(self, exc: TelegramError) -> DeliveryError:
        if isinstance(exc, RetryAfter):
            wait = retry_seconds(exc)
            return DeliveryError(f"Telegram flood control: retry after {wait:g}s",
                                 retry_after=wait)
        if isinstance(exc, BadRequest):
            return DeliveryError(f"Telegram refused the message: {self._scrub(exc.message)}",
                                 permanent=True)
        if isinstance(exc, Forbidden):
            return DeliveryError(f"Telegram forbids sending here: {self._scrub(exc.message)}",
                                 permanent=True)
        if isinstance(exc, InvalidToken):
            self._on_revoked()
            return DeliveryError("Telegram refused the bot token")
        if isinstance(exc, TimedOut):
            return DeliveryError("Telegram did not answer in time")
        if isinstance(exc, NetworkError):
            return DeliveryError(f"Telegram unreachable or failing: {self._scrub(exc.message)}")
        return DeliveryError(f"Telegram error: {self._scrub(exc.message)}")

    async def notice(self, chat: ChatRef, reply_to: str | None, text: str) -> None:
        """A plain note sent at once, outside the outbox (e.g. a file that was refused)."""
        target = Target.of(chat)
        try:
            await self._bot.send_message(target.chat_id, text, message_thread_id=target.thread,
                                         reply_parameters=quote(reply_to))
        except TelegramError as exc:
            log.warning("notice to %s not delivered: %s", chat.key,
                        self._scrub(f"{exc.__class__.__name__}: {exc}"))
