"""The fake Discord's records and the payloads it builds, in Discord's own shapes (API v10)."""

from __future__ import annotations

import datetime
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

MAX_CONTENT = 2000  # characters of a message's content
MAX_ROWS = 5  # action rows per message
MAX_ROW_BUTTONS = 5
MAX_LABEL = 80
MAX_CUSTOM_ID = 100
MAX_SELECT_OPTIONS = 25
INTERACTION_DEADLINE = 3.0  # seconds to answer an interaction's first callback
DISCORD_EPOCH_MS = 1420070400000

# Gateway opcodes.
DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = (
    0, 1, 2, 6, 7, 9, 10, 11)
# Intents.
GUILDS, GUILD_MESSAGES, DM_MESSAGES, MESSAGE_CONTENT = 1 << 0, 1 << 9, 1 << 12, 1 << 15
PRIVILEGED = {1 << 1: "GUILD_MEMBERS", 1 << 8: "GUILD_PRESENCES",
              MESSAGE_CONTENT: "MESSAGE_CONTENT"}
# Application flags that grant privileged intents (the Developer Portal's switches).
FLAG_MESSAGE_CONTENT = 1 << 18
FLAG_MESSAGE_CONTENT_LIMITED = 1 << 19
FLAG_MEMBERS = 1 << 14
FLAG_PRESENCE = 1 << 12

CHANNEL_TEXT, CHANNEL_DM, CHANNEL_PUBLIC_THREAD = 0, 1, 11


class Snowflakes:
    """Ids that grow with time, as Discord's do (history's `after` and `before` compare them)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def next(self) -> str:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return str((ms << 22) | (next(self._counter) & 0x3FFFFF))


def iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def user_payload(user_id: str, name: str, *, bot: bool = False) -> JSON:
    payload: JSON = {"id": user_id, "username": name, "discriminator": "0", "avatar": None,
                     "global_name": name, "public_flags": 0}
    if bot:
        payload["bot"] = True
    return payload


@dataclass
class Channel:
    id: str
    type: int
    guild_id: str | None = None
    parent_id: str | None = None
    name: str = ""
    recipient: str | None = None  # a DM's other person
    owner_id: str | None = None  # who opened a thread
    messages: dict[str, JSON] = field(default_factory=dict)  # id -> payload, in id order

    def payload(self, users: dict[str, JSON]) -> JSON:
        data: JSON = {"id": self.id, "type": self.type, "name": self.name}
        if self.type == CHANNEL_DM:
            data["recipients"] = [users[self.recipient]] if self.recipient in users else []
            data["last_message_id"] = next(reversed(self.messages), None)
            return data
        data.update(guild_id=self.guild_id, position=0, permission_overwrites=[], nsfw=False,
                    parent_id=self.parent_id)
        if self.type == CHANNEL_PUBLIC_THREAD:
            data.update(owner_id=self.owner_id, member_count=1, message_count=len(self.messages),
                        thread_metadata={"archived": False, "auto_archive_duration": 1440,
                                         "archive_timestamp": iso_now(), "locked": False})
        return data


@dataclass
class SentMessage:
    """A message the bot sent or edited (the latest content)."""

    id: str
    channel_id: str
    content: str
    components: list[JSON]
    attachments: list[JSON]
    reference: str | None  # the message it replies to
    edits: int = 0
    via_interaction: bool = False

    @property
    def buttons(self) -> list[JSON]:
        return [c for row in self.components for c in row.get("components", [])]


@dataclass
class FollowUp:
    """A follow-up message to an interaction: `ephemeral` ones only its user sees."""

    user_id: str
    content: str
    ephemeral: bool


@dataclass
class Reaction:
    channel_id: str
    message_id: str
    emoji: str
    added: bool
    time: float = field(default_factory=time.monotonic)


@dataclass
class Interaction:
    id: str
    token: str
    kind: int
    channel_id: str
    user_id: str
    created: float = field(default_factory=time.monotonic)
    callbacks: list[JSON] = field(default_factory=list)  # the bodies of its callbacks
    late: bool = False  # its first callback came after the 3 s deadline
    original: str | None = None  # id of the message its response became
    message_id: str | None = None  # the message a component belongs to


@dataclass
class Connection:
    """One gateway websocket, as the fake sees it."""

    query: dict[str, str]
    identified: JSON | None = None
    resumed: JSON | None = None
    heartbeats: int = 0
    closed: bool = False
    close_code: int | None = None
