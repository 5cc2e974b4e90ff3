"""Delivering replies to Discord: plan (which messages a reply takes), render, send.

A reply that takes several messages goes through adapters/common/multipart.py, which records
each part that got through by outbox id, so a retry or a restart never posts a part twice.
A reply of more than `max_chunks` messages goes as a Markdown file. The first part quotes the
person's message (without failing when it was deleted). The answer to a slash command
replaces the command's "thinking" response (interactions.py); a question gets its buttons
(buttons.py).
"""

from __future__ import annotations

import functools
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
from picobridge.adapters.discord.uploads import batches, fingerprint, send_files
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind

log = logging.getLogger("picobridge.discord.send")

OnQuestion = Callable[[str, discord.Message, str], Awaitable[None]]
Part = tuple[str, Callable[[], Awaitable[Any]]]
LONG_REPLY_NOTE = "The full answer is long, so it is attached as a file."


def nonce(outbox_id: int, part: int) -> str:
    return f"pb{outbox_id}.{part}"[:25]


@dataclass(frozen=True, slots=True)
class Plan:
    pieces: list[str]
    as_file: bool
    components: list[dict[str, Any]] | None


def plan(reply: OutgoingReply, max_chunks: int, questions: Questions) -> Plan:
    pieces = render(reply.text) or ([] if reply.files else [EMPTY_REPLY])
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
                and not reply.files and await self._pending.answer(chat, chosen.pieces[0]):
            return
        channel = self._client.get_partial_messageable(target_channel(chat))
        parts = self._parts_of(channel, reply, chosen, stream)
        sending = await MultipartSend.begin(self._parts, reply.outbox_id, [p[0] for p in parts])
        await sending.run(parts, functools.partial(delivery_error,
                                                   on_auth_failure=self._on_auth_failure))

    def _parts_of(self, channel: discord.PartialMessageable, reply: OutgoingReply,
                  chosen: Plan, stream: discord.PartialMessage | None) -> list[Part]:
        """The reply as parts sent in order, each once (also across retries and restarts):
        its text in messages (or as a file when long), then its files."""
        parts: list[Part] = []
        comment = None
        if chosen.as_file:
            parts.append((f"long:{reply.text}", lambda: self._file(channel, reply, stream)))
        elif reply.files and stream is None and not chosen.components and (
                len(chosen.pieces) == 1):
            # Files with a short text: one message, the text above the files.
            comment = chosen.pieces[0] if reply.text.strip() else None
        else:
            parts.extend((text, self._part(channel, text, reply.reply_to if index == 0 else None,
                                           stream if index == 0 else None, chosen.components,
                                           reply, index))
                         for index, text in enumerate(chosen.pieces))
        for number, batch in enumerate(batches(reply.files)):
            words = comment if number == 0 else None
            tag = None if reply.outbox_id is None else nonce(reply.outbox_id, len(parts))
            parts.append((fingerprint(batch),
                          functools.partial(send_files, channel, batch, words, tag)))
        return parts

    def _part(self, channel: discord.PartialMessageable, text: str, reply_to: str | None,
              stream: discord.PartialMessage | None, components: list[dict[str, Any]] | None,
              reply: OutgoingReply, index: int) -> Callable[[], Awaitable[Any]]:
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
            if reply.outbox_id is not None:
                # Discord keeps a nonce for a few minutes and answers a message sent again
                # with the same one with the first (discord.py sends enforce_nonce): a part
                # sent again after a crash, before the outbox marked it sent, shows once.
                kwargs["nonce"] = nonce(reply.outbox_id, index)
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
