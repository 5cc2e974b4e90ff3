"""Slack events -> what the bridge should see, as pure functions (no I/O), so every rule about
which Slack message becomes an agent message is testable without a network.

Conversations (see adapters/slack.py for the full picture):

- A DM outside any thread is one conversation per DM channel: ChatRef(slack, D…, None).
- A thread, in a DM or a channel, is its own conversation: ChatRef(slack, channel, thread_ts).
- A channel @mention outside a thread starts a thread on that message: ChatRef(slack, C…, ts),
  so the reply goes into the thread under the mention and later messages there continue it.

`platform_message_id` is "<channel>:<ts>". Slack sends one channel mention twice (a `message`
and an `app_mention` event with different event_ids) and redelivers events it thinks were not
acknowledged; both carry the same channel and ts, so the bridge's store drops the copies.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from picobridge.adapters.common.textcommands import TEXT_COMMANDS, translate_command
from picobridge.contract import ChatRef

PLATFORM = "slack"

# Message subtypes that are a person (or, when allowed, a bot) saying something.
_CONTENT_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "me_message"})

_LINK = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")
_SPACES = re.compile(r"[ \t]{2,}")


@dataclass(frozen=True, slots=True)
class Skip:
    """The event is not for the agent; `reason` is for the debug log."""

    reason: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A message that may go to the bridge."""

    chat: ChatRef
    channel: str
    ts: str
    user: str
    text: str
    sender_name: str = ""
    files: tuple[dict[str, Any], ...] = ()
    is_dm: bool = False
    # A thread reply in a channel without a mention: forwarded only when the bridge already
    # holds that thread (BridgeLink.knows_chat), so the bot does not join every thread.
    needs_known_thread: bool = False
    event_id: str | None = None

    @property
    def platform_message_id(self) -> str:
        return message_id(self.channel, self.ts)


def ts_seconds(ts: object) -> float | None:
    """A Slack timestamp ("1712345678.000200") as seconds; None when it is not one."""
    try:
        return float(str(ts))
    except ValueError:
        return None


def message_id(channel: str, ts: str) -> str:
    return f"{channel}:{ts}"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the bot is in this workspace (from auth.test)."""

    user_id: str
    bot_id: str | None = None
    team_id: str | None = None


def is_dm_channel(channel: str, channel_type: str | None = None) -> bool:
    if channel_type is not None:
        return channel_type == "im"
    return channel.startswith("D")


def strip_mention(text: str, bot_user_id: str) -> str:
    """Remove mentions of the bot: the agent needs the request, not the addressing."""
    text = re.sub(r"<@" + re.escape(bot_user_id) + r"(?:\|[^>]*)?>", "", text)
    return _SPACES.sub(" ", text).strip()


def plain_text(text: str) -> str:
    """Slack's wire format (escaped entities, <links|labels>, <@U…>) as readable plain text."""

    def link(m: re.Match[str]) -> str:
        target, label = m.group(1), m.group(2)
        if target.startswith("@"):
            return "@" + (label or target[1:])
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            name = target[1:].split("^", 1)[0]
            return "@" + (label or name)
        if target.startswith("mailto:"):
            return label or target[len("mailto:"):]
        if label and label != target:
            return f"{label} ({target})"
        return target

    return html.unescape(_LINK.sub(link, text))


def slash_command_text(text: str) -> str | None:
    """`/picobridge new` -> `/new`, `/picobridge agent coder` -> `/agent coder`; None when
    the word is not a bridge command."""
    parts = text.strip().split(None, 1) or ["help"]
    word = parts[0].lower().lstrip("/!")
    if word not in TEXT_COMMANDS:
        return None
    return f"/{word} {parts[1]}" if len(parts) > 1 else f"/{word}"


def normalise(body: dict[str, Any], me: Identity, *, allow_bots: bool,
              command_prefix: str, platform: str = PLATFORM) -> Candidate | Skip:
    """Decide what an Events API payload means for the bridge."""
    if body.get("type") != "event_callback":
        return Skip(f"payload type {body.get('type')!r}")
    event = body.get("event")
    if not isinstance(event, dict):
        return Skip("no event")
    found = _message_of(event)
    if isinstance(found, Skip):
        return found
    message, subtype = found
    channel = event.get("channel") or message.get("channel")
    ts = message.get("ts")
    if not isinstance(channel, str) or not channel or not isinstance(ts, str) or not ts:
        return Skip("no channel or ts")
    user = _author(message, subtype, me, allow_bots)
    if isinstance(user, Skip):
        return user
    raw = str(message.get("text") or "")
    mentioned = event.get("type") == "app_mention" or f"<@{me.user_id}" in raw
    profile = message.get("user_profile")
    name = ""
    if isinstance(profile, dict):
        name = str(profile.get("display_name") or profile.get("real_name") or "")
    event_id = body.get("event_id")
    common: dict[str, Any] = {
        "channel": channel, "ts": ts, "user": user, "sender_name": name,
        "text": translate_command(plain_text(strip_mention(raw, me.user_id)), command_prefix),
        "files": tuple(f for f in message.get("files") or () if isinstance(f, dict)),
        "event_id": event_id if isinstance(event_id, str) else None,
    }
    thread_ts = message.get("thread_ts")
    thread_ts = thread_ts if isinstance(thread_ts, str) and thread_ts else None
    channel_type = event.get("channel_type") if event.get("type") == "message" else None
    if is_dm_channel(channel, channel_type):
        return Candidate(chat=ChatRef(platform, channel, thread_ts), is_dm=True, **common)
    if thread_ts is not None:
        return Candidate(chat=ChatRef(platform, channel, thread_ts),
                         needs_known_thread=not mentioned, **common)
    if not mentioned:
        return Skip("channel message without mention")
    return Candidate(chat=ChatRef(platform, channel, ts), **common)


def _message_of(event: dict[str, Any]) -> tuple[dict[str, Any], str | None] | Skip:
    """The message an event carries (and its subtype), or why it carries none."""
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return Skip(f"event type {kind!r}")
    subtype = event.get("subtype")
    if subtype == "message_changed":
        inner = event.get("message")
        # An upload can arrive as an edit of a placeholder message; its ts is the original's,
        # so the file is taken once however Slack reports it. Plain edits are ignored.
        if not isinstance(inner, dict) or inner.get("subtype") != "file_share":
            return Skip("message_changed")
        return inner, "file_share"
    if subtype not in _CONTENT_SUBTYPES and subtype != "bot_message":
        return Skip(f"subtype {subtype!r}")
    return event, subtype


def _author(message: dict[str, Any], subtype: str | None, me: Identity,
            allow_bots: bool) -> str | Skip:
    """Who wrote the message, or why it is not taken (our own, or a bot's when not allowed)."""
    user = message.get("user")
    bot_id = message.get("bot_id")
    if user == me.user_id or (bot_id is not None and bot_id == me.bot_id):
        return Skip("own message")
    if bot_id is not None or subtype == "bot_message":
        if not allow_bots:
            return Skip("bot message")
        user = user or bot_id
    if not isinstance(user, str) or not user:
        return Skip("no user")
    return user
