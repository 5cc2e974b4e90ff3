"""What the store hands back, and the text scrubbing applied before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, replace

from picobridge.contract import (
    DEFAULT_AGENT,
    Attachment,
    ChatRef,
    InboundMessage,
    OutgoingReply,
    ReplyKind,
    scrub_surrogates,
)

# Statuses of an inbound message that still wait for the agent.
OPEN_STATUSES = ("received", "dispatched")


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    platform_msg_id: str
    chat: ChatRef
    session_id: str
    sender_id: str
    text: str
    attachments: tuple[Attachment, ...]
    reply_to: str | None
    status: str
    attempts: int
    received_at: float
    sent_at: float | None = None  # see InboundMessage.sent_at; not kept in the database
    agent: str = DEFAULT_AGENT  # the agent its session belongs to


@dataclass(frozen=True, slots=True)
class StoredReply:
    """A reply in the outbox: the reply itself (its `outbox_id` set) and where it goes."""

    chat: ChatRef
    reply: OutgoingReply
    attempts: int = 0

    @property
    def id(self) -> int:
        assert self.reply.outbox_id is not None
        return self.reply.outbox_id

    @property
    def kind(self) -> ReplyKind:
        return self.reply.kind

    @property
    def text(self) -> str:
        return self.reply.text


@dataclass(frozen=True, slots=True)
class ChatInfo:
    chat: ChatRef
    session_id: str
    created_at: float
    updated_at: float
    open_messages: int
    agent: str = DEFAULT_AGENT  # the agent the chat talks to now


def clean(text: str) -> str:
    """Text as it can be stored: U+FFFD for what SQLite cannot take whole.

    A broken JSON escape (from a platform or the agent) can leave a lone surrogate in a str,
    which SQLite's UTF-8 binding refuses: one such message would fail every message written
    with it. A NUL would cut the text short where group writes pass it through SQLite's JSON
    functions. Neither is anything a chat could show.
    """
    text = scrub_surrogates(text)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def clean_inbound(msg: InboundMessage) -> InboundMessage:
    text, name = clean(msg.text), clean(msg.sender_name)
    if text is msg.text and name is msg.sender_name:
        return msg
    return replace(msg, text=text, sender_name=name)
