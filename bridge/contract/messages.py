"""The normalised messages: chats, what users send, what the bridge sends back, progress."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from picobridge.contract.dialogs import Dialog

_KEY_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(text: str) -> str:
    """Pair up surrogate halves and replace lone ones with U+FFFD.

    A broken JSON escape (from a platform or the agent) can leave lone surrogates in a str; no
    platform accepts them, SQLite refuses them and every UTF-8 encoder raises on them.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a conversation lives: a chat, optionally a thread/topic inside it.

    Every distinct ChatRef is its own conversation with its own agent session.
    """

    platform: str
    chat_id: str
    thread_id: str | None = None
    # platform:chat_id[:thread_id], made once: a message's path asks for it about 16 times.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        base = f"{self.platform}:{self.chat_id}"
        object.__setattr__(self, "key", base if self.thread_id is None
                           else f"{base}:{self.thread_id}")

    def session_stem(self) -> str:
        """Readable prefix for this chat's session ids, restricted to [A-Za-z0-9_.-]."""
        parts = [self.platform, self.chat_id]
        if self.thread_id is not None:
            parts.append(self.thread_id)
        return ".".join(_KEY_SAFE.sub("_", p) for p in parts)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file the user sent, already fetched by the adapter.

    Text-like files travel inline (`content`); other files were saved to disk and `path`,
    `size` and `mime` tell the agent where to find them.
    """

    name: str
    content: str | None = None
    path: str | None = None
    size: int | None = None
    mime: str | None = None
    # Seconds, for audio and video the platform says the length of (a voice note).
    duration: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in {
            "name": self.name, "content": self.content, "path": self.path,
            "size": self.size, "mime": self.mime, "duration": self.duration,
        }.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attachment:
        return cls(
            name=str(data["name"]), content=data.get("content"), path=data.get("path"),
            size=data.get("size"), mime=data.get("mime"), duration=data.get("duration"),
        )


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A chat message normalised by an adapter, before the bridge has seen it.

    `platform_message_id` must be unique per platform and stable across redeliveries: the
    bridge deduplicates on it. `reply_to` is the platform id of the message a reply should
    quote or thread under. `sent_at` is when the user sent it by the platform's clock, for a
    platform that may deliver a chat's messages out of order (one that retries an event whose
    acknowledgement was lost after newer ones): queued messages are taken in that order.
    """

    chat: ChatRef
    sender_id: str
    text: str
    platform_message_id: str
    sender_name: str = ""
    attachments: tuple[Attachment, ...] = ()
    reply_to: str | None = None
    sent_at: float | None = None
    # "private" (a one-to-one chat with the bot) or "group" (anything shared), for routes
    # that pick an agent by kind; None when the platform cannot tell.
    chat_kind: str | None = None


class ReplyKind(enum.StrEnum):
    ANSWER = "answer"  # the agent's reply to a turn
    UNSOLICITED = "unsolicited"  # an agent response with no turn in flight (scheduled jobs)
    NOTICE = "notice"  # a bridge message: command replies, access notices
    ERROR = "error"  # the turn failed; the user must be told
    QUESTION = "question"  # the agent asks the person something (`OutgoingReply.dialog`)


@dataclass(frozen=True, slots=True)
class OutboundFile:
    """A file the agent sends to the chat, with its reply.

    In a reply the outbox hands over, `path` is the bridge's own copy under state_dir (made
    when the reply was stored, so the agent may delete its file at once), `mime` was told
    from the bytes and `size` is the copy's. Before that, on its way from the agent, `path`
    is where the agent said the file is, or `content` holds the file's text.
    """

    name: str
    path: str = ""
    mime: str = "application/octet-stream"
    size: int = 0
    # A Markdown image's alt text: shown with the file where the platform can.
    caption: str = ""
    content: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "path": self.path, "mime": self.mime,
                                "size": self.size}
        if self.caption:
            data["caption"] = self.caption
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OutboundFile:
        return cls(name=str(data["name"]), path=str(data.get("path", "")),
                   mime=str(data.get("mime") or "application/octet-stream"),
                   size=int(data.get("size") or 0), caption=str(data.get("caption") or ""))


@dataclass(frozen=True, slots=True)
class OutgoingReply:
    """One reply for a chat, the same object from the agent's driver to the platform: the
    router adds whom it answers, the store its `outbox_id`, the outbox its `dialog`.

    `text` is Markdown; the adapter renders it for its platform. `files` go with it (in
    order), each a part of its own that is sent once, also across restarts.
    """

    text: str
    kind: ReplyKind = ReplyKind.ANSWER
    reply_to: str | None = None
    # Platform ids of the user messages this reply settles, so a console or test can match.
    answers: tuple[str, ...] = ()
    # Set for notices meant for one user only (a platform may show them to that user alone).
    private_to: str | None = None
    # The reply's id in the store's outbox, stable across retries and restarts: what an
    # adapter keys the progress of a reply sent in several parts on. None outside the outbox.
    outbox_id: int | None = None
    # For a QUESTION: what is asked, so a platform with buttons can offer them.
    dialog: Dialog | None = None
    files: tuple[OutboundFile, ...] = ()


class ProgressKind(enum.StrEnum):
    STARTED = "started"  # the chat's turn was handed to the agent
    TEXT = "text"  # streamed answer text (a delta)
    REASONING = "reasoning"
    TOOL_START = "tool_start"
    TOOL_DONE = "tool_done"
    STATUS = "status"  # a line about the agent's state (retrying, compacting its memory)


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    kind: ProgressKind
    text: str = ""
    tool: str = ""
    # The user messages the running turn answers (platform ids), for reactions and quoting.
    message_ids: tuple[str, ...] = ()


class Outcome(enum.StrEnum):
    DONE = "done"
    FAILED = "failed"
    REQUEUED = "requeued"  # the agent went away; the turn will run again


class SubmitResult(enum.StrEnum):
    ACCEPTED = "accepted"  # stored durably; the platform may be told it was received
    DUPLICATE = "duplicate"  # seen before; acknowledge again, do nothing
    DENIED = "denied"  # sender not allowed; stored nothing for the agent
    COMMAND = "command"  # a bridge command, handled
