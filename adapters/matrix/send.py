"""Delivering replies to Matrix: planned into parts (Markdown split at a safe size without
cutting code blocks, a very long reply as a short head plus a .md file), each rendered to
HTML, sent in the thread the message came from, and homeserver errors mapped to
`DeliveryError` (M_LIMIT_EXCEEDED with the wait the server asked for, so the outbox keeps the
chat's order while it waits).

A reply of several parts goes through adapters/common/multipart.py, so a retry (also after a
restart) goes on after the last part that arrived. Each part is sent with a transaction id
made from the reply's outbox id, the part and its content: when the daemon dies after the
homeserver took a part but before that was recorded, the homeserver recognises the repeated
transaction and does not post the part twice.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from mautrix.client import ClientAPI
from mautrix.errors import (
    MatrixConnectionError,
    MatrixRequestError,
    MatrixUnknownRequestError,
    MUnknownToken,
)
from mautrix.types import EventID, EventType, RoomID

from picobridge.adapters.common.multipart import MultipartSend
from picobridge.adapters.common.partlog import PartLog
from picobridge.adapters.common.textsplit import iter_split_markdown
from picobridge.adapters.matrix.client import LimitExceeded
from picobridge.adapters.matrix.render import message_content, split
from picobridge.adapters.matrix.uploads import UploadStep, file_content, upload
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind

log = logging.getLogger("picobridge.matrix")

HEAD_CHARS = 1500
FILE_NAME = "reply.md"
FILE_NOTE = "\n\n📎 The whole reply is in the attached file."
EMPTY_REPLY = "(The agent sent an empty reply.)"
NOTICE_KINDS = frozenset({ReplyKind.NOTICE, ReplyKind.ERROR})


@dataclass(frozen=True, slots=True)
class TextStep:
    markdown: str


@dataclass(frozen=True, slots=True)
class FileStep:
    markdown: str


Step = TextStep | FileStep | UploadStep


def plan_reply(reply: OutgoingReply, max_chunks: int) -> list[Step]:
    """The messages a reply becomes: its text (none when it is empty and files go), then one
    message per file."""
    files: list[Step] = [UploadStep(f) for f in reply.files]
    if files and not reply.text.strip():
        return files
    return [*plan(reply.text, max_chunks), *files]


def plan(markdown: str, max_chunks: int) -> list[Step]:
    """The messages one reply becomes; deterministic, so a retry can skip what was sent."""
    if not markdown.strip():
        return [TextStep(EMPTY_REPLY)]
    pieces = split(markdown)
    if len(pieces) > max_chunks:
        head = next(iter_split_markdown(markdown, lambda p: len(p) <= HEAD_CHARS), "")
        return [TextStep(head + FILE_NOTE), FileStep(markdown)]
    return [TextStep(piece) for piece in pieces] or [TextStep(EMPTY_REPLY)]


def _fingerprint(step: Step) -> str:
    if isinstance(step, UploadStep):
        return step.fingerprint()
    return step.markdown if isinstance(step, TextStep) else f"long:{step.markdown}"


def relation(chat: ChatRef, reply_to: str | None, direct: bool) -> dict[str, Any] | None:
    """Where a message goes: into the chat's thread, or quoting the message it answers in a
    room with more people (a direct chat needs no quote)."""
    if chat.thread_id is not None:
        return {"rel_type": "m.thread", "event_id": chat.thread_id, "is_falling_back": True,
                "m.in_reply_to": {"event_id": reply_to or chat.thread_id}}
    if reply_to is not None and reply_to.startswith("$") and not direct:
        return {"m.in_reply_to": {"event_id": reply_to}}
    return None


def edit_content(event_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """An m.replace of `event_id` by `content` (clients without edits show the "* " copy)."""
    return {**{k: ("* " + v if k in ("body", "formatted_body") else v)
               for k, v in content.items()},
            "m.new_content": content,
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id}}


def txn_id(outbox_id: int | None, part: str, content: dict[str, Any]) -> str | None:
    if outbox_id is None:
        return None
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]
    return f"picobridge.{outbox_id}.{part}.{digest}"


def delivery_error(exc: Exception, on_revoked: Callable[[], None]) -> DeliveryError:
    if isinstance(exc, LimitExceeded):
        return DeliveryError(f"Matrix rate limit: retry after {exc.retry_after:g}s",
                             retry_after=exc.retry_after)
    if isinstance(exc, MUnknownToken):
        on_revoked()
        return DeliveryError("the homeserver refused the access token")
    if isinstance(exc, MatrixConnectionError | aiohttp.ClientError | TimeoutError):
        return DeliveryError(f"homeserver unreachable ({exc.__class__.__name__})")
    status = getattr(exc, "http_status", 0)
    if isinstance(exc, MatrixUnknownRequestError) and (status >= 500 or status == 0):
        return DeliveryError(f"homeserver error (HTTP {status})")
    if isinstance(exc, MatrixRequestError) and 400 <= status < 500:
        return DeliveryError(f"the homeserver refused the message ({exc.__class__.__name__})",
                             permanent=True)
    return DeliveryError(f"Matrix error ({exc.__class__.__name__})")


class Sender:
    def __init__(self, client: ClientAPI, parts: PartLog, *, max_chunks: int,
                 reaction: str, on_revoked: Callable[[], None],
                 direct: Callable[[str], Awaitable[bool]], sent: Callable[[str], None]) -> None:
        """`direct(room)` tells a direct chat; `sent(event_id)` hears of each event sent."""
        self._client = client
        self._parts = parts
        self._max_chunks = max_chunks
        self._reaction = reaction
        self._on_revoked = on_revoked
        self._direct = direct
        self._sent = sent

    async def send(self, chat: ChatRef, reply: OutgoingReply, *,
                   edit: str | None = None) -> None:
        """Deliver `reply`; `edit` is the streamed draft its first part replaces."""
        steps = plan_reply(reply, self._max_chunks)
        sending = await MultipartSend.begin(self._parts, reply.outbox_id,
                                            [_fingerprint(s) for s in steps])
        try:
            for index, step in enumerate(steps):
                await sending.part(str(index), functools.partial(
                    self._step, chat, reply, step, index, edit if index == 0 else None))
        except (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError,
                TimeoutError) as exc:
            error = delivery_error(exc, self._on_revoked)
            if error.permanent:
                await sending.finish()
            raise error from None
        await sending.finish()
        if reply.kind is ReplyKind.ANSWER and reply.reply_to and self._reaction:
            await self._react(chat, reply)

    async def _step(self, chat: ChatRef, reply: OutgoingReply, step: Step, index: int,
                    edit: str | None) -> None:
        msgtype = "m.notice" if reply.kind in NOTICE_KINDS else "m.text"
        if isinstance(step, UploadStep):
            content = await file_content(self._client, chat.chat_id, step.file)
        elif isinstance(step, FileStep):
            content = await self._file_content(chat.chat_id, step.markdown)
        else:
            content = message_content(step.markdown, msgtype)
        if edit is not None and isinstance(step, TextStep):
            await self.put(chat.chat_id, edit_content(edit, content), reply.outbox_id,
                           f"{index}.edit")
            return
        if edit is not None:
            # The streamed draft cannot become a file: it goes, and the file is posted anew.
            await self._redact(chat.chat_id, edit)
        rel = relation(chat, reply.reply_to if index == 0 else None,
                       await self._direct(chat.chat_id))
        if rel is not None:
            content["m.relates_to"] = rel
        await self.put(chat.chat_id, content, reply.outbox_id, str(index))

    async def _redact(self, room: str, event_id: str) -> None:
        try:
            await self._client.redact(RoomID(room), EventID(event_id))
        except (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError) as exc:
            log.debug("draft %s not removed (%s)", event_id, exc.__class__.__name__)

    async def _file_content(self, room: str, markdown: str) -> dict[str, Any]:
        data = markdown.encode("utf-8")
        where = await upload(self._client, room, data, "text/markdown", FILE_NAME)
        return {"msgtype": "m.file", "body": FILE_NAME, "filename": FILE_NAME, **where,
                "info": {"mimetype": "text/markdown", "size": len(data)}}

    async def put(self, room: str, content: dict[str, Any], outbox_id: int | None = None,
                  part: str = "0", kind: EventType = EventType.ROOM_MESSAGE) -> str:
        event_id = await self._client.send_message_event(
            RoomID(room), kind, cast(Any, content), txn_id=txn_id(outbox_id, part, content))
        self._sent(str(event_id))
        return str(event_id)

    async def _react(self, chat: ChatRef, reply: OutgoingReply) -> None:
        assert reply.reply_to is not None
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": reply.reply_to,
                                    "key": self._reaction}}
        try:
            await self.put(chat.chat_id, content, reply.outbox_id, "react", EventType.REACTION)
        except (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError) as exc:
            # Best effort: the answer arrived, and a reaction is no reason to send it again.
            log.info("no reaction in %s (%s)", chat.chat_id, exc.__class__.__name__)

    async def notice(self, room: str, thread: str | None, text: str) -> None:
        """A plain note sent at once, outside the outbox (e.g. a file that was refused)."""
        content = message_content(text, "m.notice")
        if thread is not None:
            content["m.relates_to"] = relation(ChatRef("matrix", room, thread), None, True)
        try:
            await self.put(room, content)
        except (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError) as exc:
            log.warning("notice to %s not delivered (%s)", room, exc.__class__.__name__)

