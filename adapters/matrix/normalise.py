"""Matrix room events -> what the bridge should see, as pure functions (no I/O), so every rule
about which event becomes an agent message is testable without a homeserver.

Conversations:

- A direct room (the bot and one person) is one conversation: ChatRef(matrix, !room, None).
- A thread (an m.thread relation to its root event) is its own conversation, in any room:
  ChatRef(matrix, !room, $root).
- In a room with more people (`rooms = "mentions"`) the bot answers when mentioned (m.mentions,
  its id, its name or a pill) or replied to; the room outside threads is one conversation. In a
  thread it was mentioned in, later messages reach it without a mention (the bridge knows the
  thread).

`platform_message_id` is the event id, unique on the homeserver, so events a /sync delivers
again after a restart are dropped by the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from picobridge.adapters.common.textcommands import translate_command
from picobridge.adapters.matrix.client import Identity
from picobridge.adapters.matrix.parse import as_dict
from picobridge.contract import ChatRef

PLATFORM = "matrix"
FILE_TYPES = frozenset({"m.image", "m.file", "m.audio", "m.video"})
TEXT_TYPES = frozenset({"m.text", "m.emote"})
_SPACES = re.compile(r"[ \t]{2,}")
# The quote a reply carries in its HTML: the quoted sender's pill is no mention.
_MX_REPLY = re.compile(r"<mx-reply>.*?</mx-reply>", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Skip:
    reason: str


@dataclass(frozen=True, slots=True)
class FileRef:
    url: str  # mxc://server/media-id
    name: str
    size: int | None
    mime: str | None
    # An encrypted file's key, iv and hash (the event's `file`, matrix.e2ee): the media
    # repository holds only its ciphertext.
    key: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    chat: ChatRef
    event_id: str
    sender: str
    text: str
    sent_at: float | None
    files: tuple[FileRef, ...] = ()
    # A thread message without a mention: taken only when the bridge holds the thread.
    needs_known_thread: bool = False
    # A room message that quotes this event without a mention: taken only when it is ours.
    needs_reply_to_me: str | None = None
    # Mentioned in a room with more people: the first time, earlier messages go along.
    wants_context: bool = False
    direct: bool = False  # in a room of the bot and one person


@dataclass(frozen=True, slots=True)
class Edit:
    """An m.replace of an earlier message: its queued copy takes the new text."""

    original: str
    text: str


@dataclass(frozen=True, slots=True)
class Encrypted:
    """An encrypted event the bot cannot read (matrix.e2ee off)."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An encrypted event that could not be decrypted (matrix.e2ee); `session` names the
    group session it needed (one missing session usually covers several messages)."""

    reason: str
    session: str | None


@dataclass(frozen=True, slots=True)
class Room:
    room_id: str
    direct: bool  # the bot and one other person
    policy: str  # MatrixSettings.rooms


def relation(content: dict[str, Any]) -> dict[str, Any]:
    rel = content.get("m.relates_to")
    return rel if isinstance(rel, dict) else {}


def thread_root(content: dict[str, Any]) -> str | None:
    rel = relation(content)
    root = rel.get("event_id")
    return root if rel.get("rel_type") == "m.thread" and isinstance(root, str) else None


def replied_to(content: dict[str, Any]) -> str | None:
    rel = relation(content)
    if rel.get("rel_type") == "m.thread" and rel.get("is_falling_back"):
        return None  # a plain thread message, quoting only for clients without threads
    quoted = rel.get("m.in_reply_to")
    target = quoted.get("event_id") if isinstance(quoted, dict) else None
    return target if isinstance(target, str) else None


def strip_reply_fallback(body: str) -> str:
    """Without the "> <@someone> what they said" lines older clients put before a reply."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    if index < len(lines) and lines[index] == "":
        index += 1
    return "\n".join(lines[index:])


def mentioned(content: dict[str, Any], me: Identity) -> bool:
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict) and me.user_id in (mentions.get("user_ids") or ()):
        return True
    formatted = content.get("formatted_body")
    if isinstance(formatted, str) and f"matrix.to/#/{me.user_id}" in _MX_REPLY.sub("", formatted):
        return True
    body = str(content.get("body") or "")
    if replied_to(content):
        body = strip_reply_fallback(body)  # the quoted sender is no mention
    return me.user_id in body or any(_name_pattern(name).search(body) for name in me.names)


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w@])" + re.escape(name) + r"(?![\w])", re.IGNORECASE)


def strip_mention(text: str, me: Identity) -> str:
    """The request without its addressing ("bot: do this" -> "do this")."""
    text = text.replace(me.user_id, "")
    for name in me.names:
        text = re.sub(r"^\s*" + re.escape(name) + r"\s*[:,]?\s*", "", text, flags=re.IGNORECASE)
    return _SPACES.sub(" ", text).strip()


def file_of(content: dict[str, Any]) -> FileRef | None:
    key = as_dict(content.get("file")) or None
    url = key.get("url") if key is not None else content.get("url")
    if content.get("msgtype") not in FILE_TYPES or not isinstance(url, str):
        return None
    info = as_dict(content.get("info"))
    size = info.get("size")
    mime = info.get("mimetype")
    name = content.get("filename") or content.get("body") or "file"
    return FileRef(url, str(name), size if isinstance(size, int) else None,
                   mime if isinstance(mime, str) else None, key)


def text_of(content: dict[str, Any], me: Identity, prefix: str) -> str:
    msgtype = content.get("msgtype")
    body = str(content.get("body") or "")
    if msgtype in FILE_TYPES:
        # The body is the file name, unless a separate filename makes it a caption.
        caption = content.get("filename") and body != content.get("filename")
        body = body if caption else ""
    body = strip_reply_fallback(body) if replied_to(content) else body
    return translate_command(strip_mention(body, me), prefix)


def normalise(room: Room, event: dict[str, Any], me: Identity, *,
              prefix: str) -> Candidate | Edit | Encrypted | Skip:
    """Decide what one timeline event means for the bridge."""
    kind, sender, event_id = event.get("type"), event.get("sender"), event.get("event_id")
    if not isinstance(sender, str) or not isinstance(event_id, str):
        return Skip("no sender or event id")
    if sender == me.user_id:
        return Skip("own event")
    if kind == "m.room.encrypted":
        return Encrypted()
    content = event.get("content")
    if kind != "m.room.message" or not isinstance(content, dict):
        return Skip(f"event type {kind!r}")
    rel = relation(content)
    if rel.get("rel_type") == "m.replace":
        new = content.get("m.new_content")
        original = rel.get("event_id")
        if not isinstance(new, dict) or not isinstance(original, str):
            return Skip("edit without new content")
        return Edit(original, translate_command(strip_mention(str(new.get("body") or ""), me),
                                                prefix))
    msgtype = content.get("msgtype")
    if msgtype not in TEXT_TYPES and msgtype not in FILE_TYPES:
        return Skip(f"msgtype {msgtype!r}")  # m.notice: other bots' output, never answered
    ts = event.get("origin_server_ts")
    found = Candidate(
        chat=ChatRef(PLATFORM, room.room_id, thread_root(content)), event_id=event_id,
        sender=sender, text=text_of(content, me, prefix),
        sent_at=ts / 1000 if isinstance(ts, int | float) else None,
        files=tuple(f for f in (file_of(content),) if f is not None), direct=room.direct)
    return _addressed(room, found, content, me)


def _addressed(room: Room, found: Candidate, content: dict[str, Any],
               me: Identity) -> Candidate | Skip:
    """Whether the bot should hear it, by the room's kind and the rooms policy."""
    if room.direct or room.policy == "all":
        return found
    if room.policy == "direct":
        return Skip("a room with more people (matrix.rooms = 'direct')")
    if mentioned(content, me):
        return _with(found, wants_context=True)
    if found.chat.thread_id is not None:
        return _with(found, needs_known_thread=True)
    quoted = replied_to(content)
    if quoted is not None:
        return _with(found, needs_reply_to_me=quoted)
    return Skip("room message without mention")


def _with(found: Candidate, **changes: Any) -> Candidate:
    return replace(found, **changes)
