"""Telegram messages as the bridge sees them: which ones are for the bot, their chat, text,
sender and files. Pure functions over python-telegram-bot objects, no network.

Platform ids: a message is `"<chat_id>:<message_id>"`, the same for every redelivery of its
update and for the `edited_message` updates that change it, so SIGKILL replays deduplicate and
edits find the queued original. An album is stored under its first part's id. `update_id` is
only the polling offset.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from telegram import Audio, Message, MessageEntity, User, Voice
from telegram.constants import ChatType

from picobridge.contract import ChatRef

PLATFORM = "telegram"
# callback_query: the clicks on the buttons of the agent's questions (buttons.py).
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
GROUP_TYPES = frozenset({ChatType.GROUP, ChatType.SUPERGROUP})

# Content a user can send that the agent cannot read; a private chat is told so.
_UNSUPPORTED = ("sticker", "location", "venue", "contact", "poll", "dice", "game", "story")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A file attached to a message, before it is downloaded."""

    kind: str
    file_id: str
    size: int | None
    name: str
    mime: str | None
    duration: float | None = None  # seconds, for voice notes and audio


def chat_ref(message: Message, platform: str = PLATFORM) -> ChatRef:
    # Only real forum topics are separate conversations: in ordinary groups
    # message_thread_id is also set on replies, and those belong to the group's session.
    thread = message.message_thread_id if message.is_topic_message else None
    return ChatRef(platform, str(message.chat.id), None if thread is None else str(thread))


def platform_id(message: Message) -> str:
    return f"{message.chat.id}:{message.message_id}"


def sender(message: Message) -> User | None:
    """The human who wrote the message; None for bots, channels and anonymous admins."""
    user = message.from_user
    if user is None or user.is_bot or message.sender_chat is not None:
        return None
    return user


def is_group(message: Message) -> bool:
    return message.chat.type in GROUP_TYPES


def is_private(message: Message) -> bool:
    return message.chat.type == ChatType.PRIVATE


def addressed(message: Message, bot: BotIdentity, commands: Iterable[str]) -> bool:
    """Whether the bot should answer: always in private chats; in groups only when
    @mentioned, replied to, or sent one of its own commands."""
    if is_private(message):
        return True
    if not is_group(message):
        return False  # channels: the bot is not a participant there
    reply = message.reply_to_message
    # In a forum topic every message "replies" to the topic's creation message; that is not
    # a reply to the bot even when the bot created the topic.
    if (reply is not None and reply.from_user is not None and reply.from_user.id == bot.id
            and reply.forum_topic_created is None):
        return True
    name = bot.username.lower()
    known = {c.lower() for c in commands}
    for entity, text in _entities(message):
        if entity.type == MessageEntity.MENTION and text[1:].lower() == name:
            return True
        if (entity.type == MessageEntity.TEXT_MENTION and entity.user is not None
                and entity.user.id == bot.id):
            return True
        if entity.type == MessageEntity.BOT_COMMAND:
            command, _, target = text[1:].partition("@")
            if target.lower() == name:
                return True
            # A bare /command at the start: Telegram omits @bot when the group has one bot.
            if not target and entity.offset == 0 and command.lower() in known:
                return True
    return False


def _entities(message: Message) -> list[tuple[MessageEntity, str]]:
    found = list(message.parse_entities().items())
    found.extend(message.parse_caption_entities().items())
    return found


def display_name(user: User) -> str:
    return user.full_name or (f"@{user.username}" if user.username else str(user.id))


def strip_mention(text: str, username: str) -> str:
    """Remove @botname with the space before it, and the @botname of /command@botname; the
    rest of the text (code, indentation) stays as written."""
    name = re.escape(username)
    text = re.sub(rf"^(/\w+)@{name}(?!\w)", r"\1", text.strip(), flags=re.IGNORECASE)
    return re.sub(rf"(^|[ \t]+)@{name}(?!\w)", "", text, flags=re.IGNORECASE).strip()


def message_text(parts: Sequence[Message], bot: BotIdentity, files: int = 0) -> str:
    """The text the agent gets. In groups the mention goes and the speaker's name comes in
    front, because everybody in the group shares one session."""
    first = parts[0]
    raw = "\n\n".join(t for t in ((m.text or m.caption or "").strip() for m in parts) if t)
    if not is_group(first):
        return raw
    text = strip_mention(raw, bot.username)
    if text.startswith("/"):
        return text  # a command must stay parseable
    user = sender(first)
    name = display_name(user) if user is not None else "someone"
    if text:
        return f"{name}: {text}"
    return f"({name} sent {files} file{'s' if files != 1 else ''})" if files else ""


def unsupported_kind(message: Message) -> str | None:
    """The name of content the agent cannot read, when that is all the message holds."""
    for kind in _UNSUPPORTED:
        if getattr(message, kind, None) is not None:
            return kind
    return None


def media_of(message: Message) -> list[MediaRef]:
    refs: list[MediaRef] = []
    if message.animation is not None:
        # Telegram also fills `document` for animations (old clients); take the file once.
        a = message.animation
        refs.append(_ref("animation", a.file_id, a.file_unique_id, a.file_size, a.file_name,
                         a.mime_type or "video/mp4"))
    elif message.document is not None:
        d = message.document
        refs.append(_ref("document", d.file_id, d.file_unique_id, d.file_size, d.file_name,
                         d.mime_type))
    if message.photo:
        # Sizes come smallest first, but order is not promised: pick by area explicitly.
        p = max(message.photo, key=lambda s: (s.width * s.height, s.file_size or 0))
        refs.append(_ref("photo", p.file_id, p.file_unique_id, p.file_size, None, "image/jpeg"))
    if message.voice is not None:
        v = message.voice
        refs.append(_ref("voice", v.file_id, v.file_unique_id, v.file_size, None,
                         v.mime_type or "audio/ogg", _seconds(v)))
    if message.audio is not None:
        au = message.audio
        refs.append(_ref("audio", au.file_id, au.file_unique_id, au.file_size, au.file_name,
                         au.mime_type, _seconds(au)))
    if message.video is not None:
        vi = message.video
        refs.append(_ref("video", vi.file_id, vi.file_unique_id, vi.file_size, vi.file_name,
                         vi.mime_type or "video/mp4"))
    if message.video_note is not None:
        vn = message.video_note
        refs.append(_ref("video_note", vn.file_id, vn.file_unique_id, vn.file_size, None,
                         "video/mp4"))
    return refs


_EXTENSIONS = {"image/jpeg": ".jpg", "audio/ogg": ".ogg", "audio/mpeg": ".mp3",
               "video/mp4": ".mp4", "text/plain": ".txt", "text/markdown": ".md"}


def _seconds(media: Voice | Audio) -> float | None:
    # As serialised: reading `.duration` warns in PTB 22.2+ (an int now, a timedelta later).
    value = media.to_dict().get("duration")
    return float(value) if isinstance(value, int | float) else None


def _ref(kind: str, file_id: str, unique: str, size: int | None, name: str | None,
         mime: str | None, duration: float | None = None) -> MediaRef:
    if not name:
        ext = _EXTENSIONS.get(mime or "") or (mimetypes.guess_extension(mime) if mime else None)
        name = f"{kind}-{unique}{ext or '.bin'}"
    return MediaRef(kind, file_id, size, name, mime, duration)
