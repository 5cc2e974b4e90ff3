"""The fake Telegram's records and errors, and how the Bot API reads request values."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.server import JSON

DEFAULT_TOKEN = "5123456789:AAFakeTokenForPicobridgeTests_x7Qv0Lk3Zp9"
MAX_TEXT_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
# Bots may download files up to 20 MB through getFile and upload up to 50 MB.
MAX_DOWNLOAD_SIZE = 20 * 1024 * 1024
MAX_UPLOAD_SIZE = 50 * 1024 * 1024

STATUS_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class ApiError(Exception):
    """A Bot API error: raised by method handlers, answered as Telegram's error envelope."""

    def __init__(self, status: int, description: str, parameters: JSON | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters

    def envelope(self) -> JSON:
        body: JSON = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


def bad_request(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


@dataclass
class UploadedFile:
    """A file part of a multipart request."""

    data: bytes
    filename: str | None
    content_type: str | None


@dataclass
class StoredFile:
    """A file Telegram knows about: uploaded by the bot or sent by a (fake) user."""

    file_id: str
    file_unique_id: str
    data: bytes
    file_name: str | None
    mime_type: str | None
    file_size: int
    file_path: str
    kind: str = "document"
    width: int = 0
    height: int = 0
    duration: int = 0

    @property
    def size(self) -> int:
        return self.file_size


@dataclass
class SentMessage:
    """A message the bot sent, in its current state (after edits)."""

    chat_id: int
    message_id: int
    kind: str  # "text" or "document"
    text: str | None  # as the user sees it: surrounding whitespace stripped
    caption: str | None
    entities: list[JSON]  # of the text, or of the caption
    reply_to_message_id: int | None
    message_thread_id: int | None
    file: StoredFile | None
    params: JSON  # the sending request, as the fake decoded it
    date: int
    raw: JSON  # the Message object Telegram answered with
    edits: list[str | None] = field(default_factory=list)  # earlier texts, oldest first
    deleted: bool = False

    @property
    def document(self) -> StoredFile | None:
        return self.file if self.kind == "document" else None

    @property
    def reply_markup(self) -> JSON | None:
        """The message's inline keyboard as it is now (None: no buttons)."""
        markup = self.raw.get("reply_markup")
        return markup if isinstance(markup, dict) else None

    @property
    def buttons(self) -> list[list[JSON]]:
        """The inline keyboard's rows of buttons as they are now."""
        return [list(row) for row in (self.reply_markup or {}).get("inline_keyboard", [])]


@dataclass
class ChatAction:
    chat_id: int
    action: str
    message_thread_id: int | None
    time: float


# Form-encoded and multipart bodies carry every value as a string (python-telegram-bot sends
# plain calls form-encoded with JSON-dumped non-string values), so the fake decodes known
# fields the way the Bot API does before checking them.
_INT_FIELDS = frozenset({
    "chat_id", "message_id", "message_thread_id", "reply_to_message_id", "offset", "limit",
    "max_connections",
})
_FLOAT_FIELDS = frozenset({"timeout"})
_BOOL_FIELDS = frozenset({
    "disable_notification", "protect_content", "drop_pending_updates",
    "allow_sending_without_reply", "disable_content_type_detection",
})
_JSON_FIELDS = frozenset({
    "entities", "caption_entities", "reply_parameters", "reply_markup", "allowed_updates",
    "commands", "scope", "link_preview_options",
})


def decode_param(key: str, value: Any) -> Any:
    """Decode a request value the way the Bot API reads that field."""
    if not isinstance(value, str):
        return value
    try:
        if key in _JSON_FIELDS:
            return json.loads(value)
        if key in _INT_FIELDS:
            return int(value)
        if key in _FLOAT_FIELDS:
            return float(value)
    except ValueError:
        if key == "chat_id":
            return value  # an @username
        if key in _JSON_FIELDS:
            raise bad_request(f"can't parse {key} JSON object") from None
        raise bad_request(f"invalid {key} specified") from None
    if key in _BOOL_FIELDS:
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0", ""):
            return False
        raise bad_request(f"invalid {key} specified")
    return value
