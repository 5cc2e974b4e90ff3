"""The fake Slack's records (what tests read back), its error, and small value helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.server import JSON

DEFAULT_USER = "U0USER1"
DEFAULT_CHANNEL = "C0CHAN1"

# The text limit real Slack enforces on a message; the bridge's splitting must respect it.
MAX_TEXT_CHARS = 40_000

# Methods that take the app-level token; every other method wants the bot token.
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})

LOGIN_PAGE_HTML = """<!DOCTYPE html>
<html lang="en-US">
<head><meta charset="utf-8"><title>Sign in | Slack</title></head>
<body class="signin">
<h1>Sign in to Fake Team</h1>
<p>fake-team.slack.com</p>
<form id="signin_form" action="/" method="post">
<input type="email" name="email" placeholder="name@work-email.com">
<button type="submit">Sign In With Email</button>
</form>
</body>
</html>
"""


class SlackError(Exception):
    """A Web API error: ``{"ok": false, "error": ...}`` (with HTTP 200, as Slack answers)."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass
class PostedMessage:
    """A message the bot put in a channel (chat.postMessage or a file share)."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None
    files: list[JSON] = field(default_factory=list)
    params: JSON = field(default_factory=dict)
    kind: str = "message"  # "message" | "file_share"
    # earlier {"text", "params", "blocks"}, oldest first
    edits: list[JSON] = field(default_factory=list)
    deleted: bool = False
    blocks: list[JSON] | None = None  # Block Kit blocks as Slack keeps them (None: text only)


@dataclass
class CommandResponse:
    """What the bot posted to a slash command's response_url (shown only to its user)."""

    user: str
    text: str
    response_type: str  # "ephemeral" unless the bot asked for "in_channel"
    time: float


@dataclass
class EphemeralMessage:
    channel: str
    user: str
    text: str
    thread_ts: str | None
    message_ts: str


@dataclass
class ReactionChange:
    action: str  # "add" | "remove"
    channel: str
    ts: str
    name: str


@dataclass
class UploadedFile:
    """A file the bot uploaded through files.getUploadURLExternal + completeUploadExternal."""

    file_id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    alt_txt: str | None = None
    snippet_type: str | None = None
    completed: bool = False
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None


@dataclass
class AssistantStatus:
    channel_id: str
    thread_ts: str
    status: str
    loading_messages: list[str] | None = None


@dataclass
class Delivery:
    """One envelope written to a Socket Mode connection."""

    envelope: JSON
    connection_id: int
    time: float

    @property
    def envelope_id(self) -> str:
        return str(self.envelope["envelope_id"])

    @property
    def retry_attempt(self) -> int:
        return int(self.envelope.get("retry_attempt") or 0)

    @property
    def event_id(self) -> str | None:
        payload = self.envelope.get("payload")
        event_id = payload.get("event_id") if isinstance(payload, dict) else None
        return event_id if isinstance(event_id, str) else None


@dataclass
class Ack:
    envelope_id: str
    payload: JSON | None
    time: float
    connection_id: int
    known: bool  # False when the envelope id was never sent by the fake


@dataclass
class FileDownload:
    file_id: str
    authorized: bool
    time: float


@dataclass
class HttpDelivery:
    """What a daemon in HTTP mode answered to an event the fake POSTed to it."""

    status: int
    body: str
    headers: Mapping[str, str]
    payload: JSON


@dataclass
class StoredFile:
    """A file Slack hosts: its file object and its bytes."""

    obj: JSON
    content: bytes


@dataclass
class SocketConn:
    """One Socket Mode websocket."""

    id: int
    ws: web.WebSocketResponse
    request: web.Request


@dataclass
class EventState:
    """Redelivery bookkeeping for one Events API event_id."""

    event_id: str
    payload: JSON
    attempts: int = 0  # highest retry_attempt sent so far
    acked: bool = False
    envelope_ids: list[str] = field(default_factory=list)


def truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() in ("1", "true", "yes")
    return bool(value)


def ts_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)
