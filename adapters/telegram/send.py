"""Delivering replies to Telegram: Markdown rendered to text + entities (never parse_mode, so
nothing can fail to parse), split at 4096 UTF-16 units without breaking code blocks, a long
reply as a short head plus a .md file, and Bot API errors mapped to `DeliveryError`.

A reply of several messages is sent through adapters/common/multipart.py: a retry, also after
a restart, goes on after the last part that arrived."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from telegram import Bot, InlineKeyboardMarkup, Message, MessageEntity, ReplyParameters
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

from picobridge.adapters.common.multipart import MultipartSend
from picobridge.adapters.common.partlog import PartLog
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.media import (
    MediaStep,
    NoteStep,
    caption_for,
    media_steps,
    refused_note,
    send_media,
)
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


Step = TextStep | FileStep | MediaStep | NoteStep


@dataclass(frozen=True, slots=True)
class _Part:
    id: str
    quote: ReplyParameters | None  # only the first part quotes the user's message
    edit: int | None  # the streamed draft the first part replaces
    markup: InlineKeyboardMarkup | None = None  # a question's buttons, under its last part
    # The reply's message that got `markup` lands here: changing it later needs its id.
    carriers: list[Message] = field(default_factory=list)


def _fingerprint(step: Step) -> str:
    """What a step sends, for telling whether a saved progress belongs to this plan."""
    if isinstance(step, MediaStep):
        return step.fingerprint()
    if isinstance(step, NoteStep):
        return f"note:{step.text}"
    return step.chunk.text if isinstance(step, TextStep) else f"file:{step.markdown}"


def plan_reply(reply: OutgoingReply, max_chunks: int) -> list[Step]:
    """The messages a reply becomes: its text, then its files, or the files alone with the
    text as the first one's caption when it fits one."""
    if not reply.files:
        return plan(reply.text, max_chunks)
    caption = caption_for(reply.text)
    files: list[Step] = [*media_steps(reply.files, caption)]
    if caption is not None and any(isinstance(step, MediaStep) for step in files):
        return files
    if not reply.text.strip():
        return files
    return [*plan(reply.text, max_chunks), *media_steps(reply.files, None)]


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
    from picobridge.adapters.common.textsplit import iter_split_markdown  # as render's

    piece = next(iter_split_markdown(markdown, lambda p: len(p) <= HEAD_CHARS), "")
    rendered = render_telegram(piece, LIMIT - len(FILE_NOTE) * 2) if piece.strip() else []
    first = rendered[0] if rendered else TelegramChunk("", ())
    return TelegramChunk((first.text + FILE_NOTE).strip(), first.entities)


def quote(reply_to: str | None) -> ReplyParameters | None:
    if reply_to is None or not reply_to.isdigit():
        return None
    # The user may have deleted their message meanwhile; the answer must still arrive.
    return ReplyParameters(message_id=int(reply_to), allow_sending_without_reply=True)


def _carried(part: _Part, sent: object) -> None:
    if part.markup is not None and isinstance(sent, Message):
        part.carriers.append(sent)


def _formatting_refused(exc: BadRequest) -> bool:
    text = exc.message.lower()
    return "entit" in text or "parse" in text or "too long" in text


class Sender:
    def __init__(self, bot: Bot, parts: PartLog, *, max_chunks: int,
                 scrub: Callable[[str], str], on_revoked: Callable[[], None]) -> None:
        self._bot = bot
        self._parts = parts
        self._max_chunks = max_chunks
        self._scrub = scrub
        self._on_revoked = on_revoked

    async def send(self, chat: ChatRef, reply: OutgoingReply, *, edit: int | None = None,
                   markup: InlineKeyboardMarkup | None = None) -> Message | None:
        """Deliver `reply`; when `edit` is the streamed draft of its turn, the draft becomes
        the first part; `markup` goes under the last part. A retry, also after a restart,
        sends only what did not arrive. Returns the message that carries `markup`."""
        steps = plan_reply(reply, self._max_chunks)
        sending = await MultipartSend.begin(self._parts, reply.outbox_id,
                                            [_fingerprint(step) for step in steps])
        carriers: list[Message] = []
        try:
            await self._deliver(Target.of(chat), reply, steps, sending, edit, markup,
                                carriers)
        except DeliveryError as exc:
            if exc.permanent:
                await sending.finish()
            raise
        await sending.finish()
        return carriers[-1] if carriers else None

    async def _deliver(self, target: Target, reply: OutgoingReply, steps: list[Step],
                       sending: MultipartSend, edit: int | None,
                       markup: InlineKeyboardMarkup | None, carriers: list[Message]) -> None:
        for index, step in enumerate(steps):
            part = _Part(str(index), quote(reply.reply_to) if index == 0 else None,
                         edit if index == 0 else None,
                         markup if index == len(steps) - 1 else None, carriers)
            try:
                try:
                    await sending.part(part.id, functools.partial(
                        self._step, target, step, part, sending))
                except ChatMigrated as exc:
                    # The group became a supergroup; this reply still belongs there.
                    target = Target(int(exc.new_chat_id), None)
                    await sending.part(part.id, functools.partial(
                        self._step, target, step, part, sending))
            except TelegramError as exc:
                check_cancelled()
                raise self.delivery_error(exc) from None

    async def _step(self, target: Target, step: Step, part: _Part,
                    sending: MultipartSend) -> None:
        if isinstance(step, MediaStep | NoteStep):
            await self._media(target, step, part)
            return
        if isinstance(step, FileStep):
            _carried(part, await self._bot.send_document(
                target.chat_id, document=step.markdown.encode("utf-8"), filename=FILE_NAME,
                message_thread_id=target.thread, reply_parameters=part.quote,
                reply_markup=part.markup))
            return
        chunk = step.chunk
        if part.edit is not None:
            if await self._edit(target, part, chunk):
                return
            # Sent anew below; the draft would otherwise stay on screen half-written.
            await self._delete(target, part.edit)
        if sending.begun(part.id):
            # Half sent as plain text before: carry on that way, never repeat a piece.
            await self._plain(target, chunk.text, part, sending)
            return
        try:
            await self._message(target, chunk.text, part, chunk.entities or None)
        except BadRequest as exc:
            if not _formatting_refused(exc):
                raise
            log.warning("Telegram refused a formatted message (%s); sending it as plain text",
                        self._scrub(exc.message))
            await self._plain(target, chunk.text, part, sending)

    async def _media(self, target: Target, step: MediaStep | NoteStep, part: _Part) -> None:
        if part.edit is not None:
            # The streamed draft cannot become a file; the answer goes anew below.
            await self._delete(target, part.edit)
        if isinstance(step, MediaStep):
            common: dict[str, Any] = {"reply_parameters": part.quote}
            if part.markup is not None:
                common["reply_markup"] = part.markup
            try:
                _carried(part, await send_media(self._bot, target.chat_id, target.thread, step,
                                                common))
                return
            except BadRequest as exc:
                # Telegram will refuse it again: a note in its place, with the text it carried,
                # rather than a reply that fails for good.
                log.warning("Telegram refused %s %s (%s); a note goes instead", step.method,
                            ", ".join(f.name for f in step.files), self._scrub(exc.message))
                step = refused_note(step)
        await self._message(target, step.text, part)

    async def _plain(self, target: Target, text: str, part: _Part,
                     sending: MultipartSend) -> None:
        pieces = plain_chunks(text, LIMIT)
        for number, piece in enumerate(pieces):
            quoted = part.quote if number == 0 else None
            last = number == len(pieces) - 1
            piece_part = _Part(part.id, quoted, None, part.markup if last else None,
                               part.carriers)
            await sending.part(f"{part.id}.{number}", functools.partial(
                self._piece, target, piece, piece_part))

    async def _piece(self, target: Target, text: str, part: _Part) -> None:
        await self._message(target, text, part)

    async def _message(self, target: Target, text: str, part: _Part,
                       entities: tuple[MessageEntity, ...] | None = None) -> None:
        if part.markup is not None:
            _carried(part, await self._bot.send_message(
                target.chat_id, text, entities=entities, message_thread_id=target.thread,
                reply_parameters=part.quote, reply_markup=part.markup))
            return
        # Without buttons nothing needs the sent message back: Bot.send_message would parse
        # Telegram's answer (with the quoted message inside it) into objects only to drop
        # them, 0.14 ms a reply here (a tenth of the daemon's CPU per message). Bot._post is
        # the same call (parameters, rate limiter, errors) without that parsing.
        await self._bot._post("sendMessage", {
            "chat_id": target.chat_id, "text": text, "entities": entities,
            "message_thread_id": target.thread, "reply_parameters": part.quote})

    async def _edit(self, target: Target, part: _Part, chunk: TelegramChunk) -> bool:
        """Turn the streamed draft into the first part of the answer; False: send instead."""
        message_id = part.edit
        assert message_id is not None
        try:
            _carried(part, await self._bot.edit_message_text(
                chunk.text, chat_id=target.chat_id, message_id=message_id,
                entities=chunk.entities or None, reply_markup=part.markup))
        except BadRequest as exc:
            if "not modified" in exc.message.lower():
                return True
            log.info("streamed message %d not replaced (%s); sending the answer anew",
                     message_id, self._scrub(exc.message))
            return False
        return True

    async def _delete(self, target: Target, message_id: int) -> None:
        try:
            await self._bot.delete_message(target.chat_id, message_id)
        except TelegramError as exc:
            check_cancelled()
            log.debug("streamed message %d not deleted: %s", message_id,
                      self._scrub(exc.message))

    def delivery_error(self, exc: TelegramError) -> DeliveryError:
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
