"""Delivering replies to Discord: plan (which messages a reply takes), render, send.

A reply that takes several messages goes through adapters/common/multipart.py, which records
each part that got through by outbox id, so a retry or a restart never posts a part twice.
A reply of more than `max_chunks` messages goes as a Markdown file. The first part quotes the
person's message (without failing when it was deleted). The answer to a slash command
replaces the command's "thinking" response (interactions.py); a question gets its buttons
(buttons.py).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import discord

from picobridge.adapters.common.multipart import MultipartSend
from picobridge.adapters.common.partlog import Cursors, PartLog
from picobridge.adapters.discord.buttons import Questions
from picobridge.adapters.discord.errors import delivery_error
from picobridge.adapters.discord.interactions import Pending
from picobridge.adapters.discord.parse import PLATFORM, target_channel
from picobridge.adapters.discord.render import EMPTY_REPLY, render
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind

log = logging.getLogger("picobridge.discord.send")

OnQuestion = Callable[[str, discord.Message, str], Awaitable[None]]
LONG_REPLY_NOTE = "The full answer is long, so it is attached as a file."


@dataclass(frozen=True, slots=True)
class Plan:
    pieces: list[str]
    as_file: bool
    components: list[dict[str, Any]] | None


def plan(reply: OutgoingReply, max_chunks: int, questions: Questions) -> Plan:
    pieces = render(reply.text) or [EMPTY_REPLY]
    if len(pieces) > max_chunks:
        return Plan([LONG_REPLY_NOTE], True, None)
    components = None
    if reply.kind is ReplyKind.QUESTION and reply.dialog is not None and len(pieces) == 1:
        # A question that fits one message gets its buttons (a longer one is answered by
        # typing, as its text says).
        components = questions.components(reply.dialog)
    return Plan(pieces, False, components)


class DiscordSender:
    def __init__(self, client: discord.Client, cursors: Cursors, questions: Questions,
                 pending: Pending, *, max_chunks: int,
                 on_auth_failure: Callable[[str], None], on_question: OnQuestion) -> None:
        self._client = client
        self._on_question = on_question
        self._parts = PartLog(cursors, PLATFORM)
        self._questions = questions
        self._pending = pending
        self._max_chunks = max_chunks
        self._on_auth_failure = on_auth_failure

    async def send(self, chat: ChatRef, reply: OutgoingReply,
                   stream: discord.PartialMessage | None = None) -> None:
        try:
            await self._send(chat, reply, stream)
        except DeliveryError:
            raise
        except Exception as exc:
            raise delivery_error(exc, self._on_auth_failure) from exc

    async def _send(self, chat: ChatRef, reply: OutgoingReply,
                    stream: discord.PartialMessage | None) -> None:
        chosen = plan(reply, self._max_chunks, self._questions)
        if reply.kind is ReplyKind.NOTICE and len(chosen.pieces) == 1 and not chosen.as_file \
                and await self._pending.answer(chat, chosen.pieces[0]):
            return
        channel = self._client.get_partial_messageable(target_channel(chat))
        if chosen.as_file:
            await self._file(channel, reply, stream)
            return
        sending = await MultipartSend.begin(self._parts, reply.outbox_id, chosen.pieces)
        try:
            for index, text in enumerate(chosen.pieces):
                first = index == 0
                await sending.part(str(index), self._part(
                    channel, text, reply.reply_to if first else None,
                    stream if first else None, chosen.components, reply))
        except Exception as exc:
            error = delivery_error(exc, self._on_auth_failure)
            if error.permanent:
                await sending.finish()  # the outbox gives up on it: nothing left to resume
            raise error from exc
        await sending.finish()

    def _part(self, channel: discord.PartialMessageable, text: str, reply_to: str | None,
              stream: discord.PartialMessage | None, components: list[dict[str, Any]] | None,
              reply: OutgoingReply) -> Callable[[], Awaitable[Any]]:
        async def send() -> None:
            if stream is not None:
                await stream.edit(content=text)
                return
            view = self._questions.view(components) if components else None
            reference = None
            if reply_to is not None and reply_to.isdigit():
                reference = discord.MessageReference(message_id=int(reply_to),
                                                     channel_id=channel.id,
                                                     fail_if_not_exists=False)
            kwargs: dict[str, Any] = {"reference": reference} if reference else {}
            if view is not None:
                kwargs["view"] = view
            sent = await channel.send(text, **kwargs)
            if components and reply.dialog is not None:
                await self._on_question(reply.dialog.id, sent, text)

        return send

    async def _file(self, channel: discord.PartialMessageable, reply: OutgoingReply,
                    stream: discord.PartialMessage | None) -> None:
        file = discord.File(io.BytesIO(reply.text.encode("utf-8")), filename="reply.md")
        if stream is not None:
            await stream.edit(content=LONG_REPLY_NOTE, attachments=[file])
        else:
            await channel.send(LONG_REPLY_NOTE, file=file)
        log.info("long reply sent as a file (%d characters)", len(reply.text))
