"""An in-process fake of the Telegram Bot API for tests.

The fake is an aiohttp server on 127.0.0.1 that python-telegram-bot (or any other client) can
talk to through ``base_url=fake.base_url`` and ``base_file_url=fake.base_file_url``. It is
deliberately strict where the real service is strict (text limits, HTML/MarkdownV2 parsing,
entity bounds, long-polling semantics, error envelopes) so that a bridge that passes against it
does not fall over against api.telegram.org, and it can script the failures the real service
produces (flood control, 5xx, 409 conflicts, revoked tokens, stalled connections).

Typical use::

    async with FakeTelegram() as fake:
        bot = telegram.Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
        fake.user_message(42, 42, "hello")
        ...
        await fake.wait_for(lambda: len(fake.sent_messages(42)) >= 1)

Everything runs on the event loop of the test; nothing here blocks it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import secrets
import socket
import string
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, NamedTuple

from aiohttp import ClientSession, ClientTimeout, web

JSONDict = dict[str, Any]
MethodHandler = Callable[[JSONDict], Awaitable[Any]]

DEFAULT_TOKEN = "5123456789:AAFakeTokenForPicobridgeTests_x7Qv0Lk3Zp9"
MAX_TEXT_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
# Bots may download files up to 20 MB through getFile and upload up to 50 MB.
MAX_DOWNLOAD_SIZE = 20 * 1024 * 1024
MAX_UPLOAD_SIZE = 50 * 1024 * 1024

CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)

ENTITY_TYPES = frozenset(
    {
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "url",
        "email",
        "phone_number",
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "blockquote",
        "expandable_blockquote",
        "code",
        "pre",
        "text_link",
        "text_mention",
        "custom_emoji",
        "date_time",
    }
)

# Update types Telegram leaves out unless a client asks for them in allowed_updates.
_OPT_IN_UPDATE_TYPES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

# Methods counted by flood mode: the ones that put something in front of a user.
DEFAULT_FLOOD_METHODS = frozenset(
    {
        "sendMessage",
        "sendDocument",
        "sendPhoto",
        "sendAudio",
        "sendVoice",
        "sendVideo",
        "sendAnimation",
        "editMessageText",
        "sendMessageDraft",
    }
)

_MEDIA_METHODS = {
    "sendDocument": "document",
    "sendPhoto": "photo",
    "sendAudio": "audio",
    "sendVoice": "voice",
    "sendVideo": "video",
    "sendAnimation": "animation",
}

_FILE_PATH_DIRS = {
    "document": "documents",
    "photo": "photos",
    "audio": "music",
    "voice": "voice",
    "video": "videos",
    "animation": "animations",
}

# Form-encoded and multipart bodies carry every value as a string (python-telegram-bot sends
# plain calls form-encoded with JSON-dumped non-string values), so the fake decodes known
# fields the way the Bot API does before validating them.
_INT_FIELDS = frozenset(
    {
        "chat_id",
        "from_chat_id",
        "message_id",
        "message_thread_id",
        "reply_to_message_id",
        "offset",
        "limit",
        "user_id",
        "draft_id",
        "duration",
        "width",
        "height",
        "max_connections",
        "direct_messages_topic_id",
    }
)
_FLOAT_FIELDS = frozenset({"timeout"})
_BOOL_FIELDS = frozenset(
    {
        "disable_notification",
        "protect_content",
        "disable_web_page_preview",
        "drop_pending_updates",
        "allow_sending_without_reply",
        "is_big",
        "disable_content_type_detection",
        "has_spoiler",
        "show_caption_above_media",
        "allow_paid_broadcast",
    }
)
_JSON_FIELDS = frozenset(
    {
        "entities",
        "caption_entities",
        "reply_parameters",
        "reply_markup",
        "allowed_updates",
        "commands",
        "scope",
        "link_preview_options",
        "reaction",
        "message_ids",
        "media",
    }
)

_STATUS_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
}

_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


class ApiError(Exception):
    """A Bot API error response: raised by handlers, turned into the real error envelope."""

    def __init__(self, status: int, description: str, parameters: JSONDict | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters

    def envelope(self) -> JSONDict:
        body: JSONDict = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


def _bad_request(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


class Call(NamedTuple):
    """One authorised Bot API call as the fake received it (time is time.monotonic())."""

    method: str
    params: JSONDict
    time: float


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
    kind: str
    # What the user sees: entity markup parsed away, surrounding whitespace stripped.
    text: str | None
    raw_text: str | None
    caption: str | None
    raw_caption: str | None
    parse_mode: str | None
    entities: list[JSONDict]
    reply_to_message_id: int | None
    message_thread_id: int | None
    file: StoredFile | None
    reply_markup: JSONDict | None
    params: JSONDict
    date: int
    raw: JSONDict
    edits: list[str | None] = field(default_factory=list)
    deleted: bool = False

    @property
    def document(self) -> StoredFile | None:
        return self.file if self.kind == "document" else None


@dataclass
class ChatAction:
    chat_id: int | str
    action: str
    message_thread_id: int | None
    time: float


@dataclass
class Draft:
    chat_id: int
    draft_id: int
    text: str
    entities: list[JSONDict]
    message_thread_id: int | None
    time: float


@dataclass
class _Fault:
    kind: str  # "error", "stall" or "disconnect"
    status: int = 500
    description: str | None = None
    parameters: JSONDict | None = None
    body: bytes | None = None
    remaining: int | None = 1


# --------------------------------------------------------------------------------------------
# Formatted text: the same rules Telegram applies (UTF-16 offsets, HTML, MarkdownV2, Markdown)
# --------------------------------------------------------------------------------------------


def utf16_len(text: str) -> int:
    """Length of ``text`` as Telegram counts it: UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _byte_offset(src: str, index: int) -> int:
    # tdlib reports parse errors at UTF-8 byte offsets, so the fake does too.
    return len(src[:index].encode("utf-8", "surrogatepass"))


class _ParseError(Exception):
    pass


_LINK_SCHEMES = frozenset({"http", "https", "tg", "ton"})
_DOMAIN_RE = re.compile(r"^[\w-]+(\.[\w-]+)+(:\d+)?([/?#].*)?$")
_TG_USER_RE = re.compile(r"^tg://user\?id=(\d+)$", re.IGNORECASE)
_DATE_TIME_FORMAT_RE = re.compile(r"r|w?[dD]?[tT]?")


def _link_entity(url: str, offset: int, length: int) -> JSONDict | None:
    """A text_link/text_mention entity for ``url``, or None where Telegram drops the link."""
    url = url.strip()
    mention = _TG_USER_RE.match(url)
    if mention:
        user = {"id": int(mention.group(1)), "is_bot": False, "first_name": "User"}
        return {"type": "text_mention", "offset": offset, "length": length, "user": user}
    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", url)
    if scheme:
        if scheme.group(1).lower() not in _LINK_SCHEMES:
            return None
    elif _DOMAIN_RE.match(url):
        url = f"http://{url}"
    else:
        return None
    return {"type": "text_link", "offset": offset, "length": length, "url": url}


def _sort_entities(entities: list[JSONDict]) -> list[JSONDict]:
    return sorted(entities, key=lambda e: (e["offset"], -e["length"]))


# ---- HTML ----------------------------------------------------------------------------------

_HTML_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "tg-emoji",
        "tg-time",
        "pre",
        "code",
        "blockquote",
    }
)
_HTML_SIMPLE = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
}
_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_HTML_SPACE = " \t\n\r\v\f"


@dataclass
class _HtmlOpen:
    tag: str
    attrs: dict[str, str]
    start: int  # UTF-16 offset in the output
    out_pos: int  # index into the output character list
    byte_offset: int


def _decode_html_entity(src: str, i: int) -> tuple[str, int] | None:
    """Decode the entity at src[i] == '&'; None when it is not one Telegram supports."""
    n = len(src)
    j = i + 1
    if j < n and src[j] == "#":
        j += 1
        is_hex = j < n and src[j] in "xX"
        if is_hex:
            j += 1
        digits = string.hexdigits if is_hex else string.digits
        start = j
        while j < n and src[j] in digits:
            j += 1
        if j == start or j - i >= 10:
            return None
        code = int(src[start:j], 16 if is_hex else 10)
        if code == 0 or code >= 0x10FFFF:
            return None
        if 0xD800 <= code <= 0xDFFF:
            raise _ParseError(
                "Text contains invalid Unicode characters after decoding HTML entities, "
                "check for unmatched surrogate code units"
            )
        char = chr(code)
    else:
        start = j
        while j < n and src[j].isascii() and src[j].isalpha():
            j += 1
        named = _HTML_NAMED.get(src[start:j])
        if named is None:
            return None
        char = named
    if j < n and src[j] == ";":
        j += 1
    return char, j


def _parse_html(src: str, strict_entities: bool) -> tuple[str, list[JSONDict]]:
    out: list[str] = []
    u16 = 0
    stack: list[_HtmlOpen] = []
    entities: list[JSONDict] = []
    n = len(src)
    i = 0
    while i < n:
        c = src[i]
        if c == "&":
            decoded = _decode_html_entity(src, i)
            if decoded is not None:
                char, i = decoded
                out.append(char)
                u16 += _units(char)
                continue
            if strict_entities:
                # Telegram shows an unknown entity literally; its docs require &amp; and a
                # literal "&nbsp;" on screen is a rendering bug, so the fake rejects it.
                raise _ParseError(
                    f"Unsupported HTML entity at byte offset {_byte_offset(src, i)}: "
                    "only &lt; &gt; &amp; &quot; and numeric entities are supported"
                )
        elif c == ">" and strict_entities:
            raise _ParseError(
                f"Unescaped '>' at byte offset {_byte_offset(src, i)}; it must be written as &gt;"
            )
        if c != "<":
            out.append(c)
            u16 += _units(c)
            i += 1
            continue

        begin = i
        i += 1
        if i < n and src[i] == "/":
            if not stack:
                raise _ParseError(f"Unexpected end tag at byte offset {_byte_offset(src, begin)}")
            j = i + 1
            while j < n and src[j] not in _HTML_SPACE and src[j] != ">":
                j += 1
            end_name = src[i + 1 : j].lower()
            while j < n and src[j] in _HTML_SPACE:
                j += 1
            if j >= n or src[j] != ">":
                raise _ParseError(f"Unclosed end tag at byte offset {_byte_offset(src, begin)}")
            i = j + 1
            top = stack[-1]
            if end_name and end_name != top.tag:
                raise _ParseError(
                    f"Unmatched end tag at byte offset {_byte_offset(src, begin)}, "
                    f'expected "</{top.tag}>", found "</{end_name}>"'
                )
            stack.pop()
            _close_html_tag(top, u16, out, entities)
            continue

        j = i
        while j < n and src[j] not in _HTML_SPACE and src[j] != ">":
            j += 1
        if j >= n:
            raise _ParseError(f"Unclosed start tag at byte offset {_byte_offset(src, begin)}")
        tag = src[i:j].lower()
        if tag not in _HTML_TAGS:
            raise _ParseError(
                f'Unsupported start tag "{tag}" at byte offset {_byte_offset(src, begin)}'
            )
        attrs, i = _parse_html_attributes(src, j, tag, _byte_offset(src, begin))
        if tag == "span" and attrs.get("class") != "tg-spoiler":
            raise _ParseError(
                f'Tag "span" must have class "tg-spoiler" at byte offset {_byte_offset(src, begin)}'
            )
        stack.append(_HtmlOpen(tag, attrs, u16, len(out), _byte_offset(src, begin)))

    if stack:
        raise _ParseError(f"Can't find end tag corresponding to start tag {stack[-1].tag}")
    for entity in entities:
        entity.pop("_language", None)
    return "".join(out), _sort_entities(entities)


def _parse_html_attributes(src: str, i: int, tag: str, at: int) -> tuple[dict[str, str], int]:
    """Parse attributes from src[i] up to and including '>'; returns them and the next index."""
    n = len(src)
    attrs: dict[str, str] = {}
    while True:
        while i < n and src[i] in _HTML_SPACE:
            i += 1
        if i >= n:
            raise _ParseError(f"Unclosed start tag at byte offset {at}")
        if src[i] == ">":
            return attrs, i + 1
        name_start = i
        while i < n and src[i] not in _HTML_SPACE and src[i] not in "=>":
            i += 1
        name = src[name_start:i].lower()
        if not name:
            raise _ParseError(f'Empty attribute name in the tag "{tag}" at byte offset {at}')
        while i < n and src[i] in _HTML_SPACE:
            i += 1
        if i >= n:
            raise _ParseError(f"Unclosed start tag at byte offset {at}")
        if src[i] != "=":
            if tag == "blockquote" and name == "expandable":
                attrs[name] = ""
                continue
            raise _ParseError(
                "Expected equal sign in declaration of an attribute of the tag "
                f'"{tag}" at byte offset {at}'
            )
        i += 1
        while i < n and src[i] in _HTML_SPACE:
            i += 1
        if i >= n:
            raise _ParseError(f'Unclosed start tag "{tag}" at byte offset {at}')
        if src[i] in "'\"":
            quote = src[i]
            i += 1
            value: list[str] = []
            while i < n and src[i] != quote:
                if src[i] == "&":
                    decoded = _decode_html_entity(src, i)
                    if decoded is not None:
                        value.append(decoded[0])
                        i = decoded[1]
                        continue
                value.append(src[i])
                i += 1
            if i >= n:
                raise _ParseError(f"Unclosed start tag at byte offset {at}")
            i += 1
            attrs[name] = "".join(value)
        else:
            token_start = i
            while i < n and ((src[i].isascii() and src[i].isalnum()) or src[i] in ".-"):
                i += 1
            if i < n and src[i] not in _HTML_SPACE and src[i] != ">":
                raise _ParseError(
                    f"Unexpected end of name token at byte offset {_byte_offset(src, token_start)}"
                )
            attrs[name] = src[token_start:i].lower()


def _close_html_tag(top: _HtmlOpen, u16: int, out: list[str], entities: list[JSONDict]) -> None:
    length = u16 - top.start
    if length <= 0:
        return
    tag, offset = top.tag, top.start
    if tag in _HTML_SIMPLE:
        entities.append({"type": _HTML_SIMPLE[tag], "offset": offset, "length": length})
    elif tag == "blockquote":
        kind = "expandable_blockquote" if "expandable" in top.attrs else "blockquote"
        entities.append({"type": kind, "offset": offset, "length": length})
    elif tag == "tg-emoji":
        emoji_id = top.attrs.get("emoji-id", "")
        if not emoji_id.isdigit() or int(emoji_id) == 0:
            raise _ParseError("Invalid custom emoji identifier specified")
        entities.append(
            {
                "type": "custom_emoji",
                "offset": offset,
                "length": length,
                "custom_emoji_id": emoji_id,
            }
        )
    elif tag == "tg-time":
        entities.append(
            _date_time_entity(
                top.attrs.get("unix", ""), top.attrs.get("format", ""), offset, length
            )
        )
    elif tag == "a":
        url = top.attrs.get("href") or "".join(out[top.out_pos :])
        link = _link_entity(url, offset, length)
        if link is not None:
            entities.append(link)
    elif tag == "pre":
        last = entities[-1] if entities else None
        if (
            last is not None
            and last["type"] == "code"
            and last.get("_language")
            and (last["offset"], last["length"]) == (offset, length)
        ):
            entities[-1] = {
                "type": "pre",
                "offset": offset,
                "length": length,
                "language": last["_language"],
            }
        else:
            entities.append({"type": "pre", "offset": offset, "length": length})
    elif tag == "code":
        css = top.attrs.get("class", "")
        language = css[len("language-") :] if css.startswith("language-") else ""
        last = entities[-1] if entities else None
        if (
            last is not None
            and last["type"] == "pre"
            and language
            and (last["offset"], last["length"]) == (offset, length)
        ):
            last["language"] = language
        else:
            code: JSONDict = {"type": "code", "offset": offset, "length": length}
            if language:
                code["_language"] = language
            entities.append(code)


def _date_time_entity(unix: str, fmt: str, offset: int, length: int) -> JSONDict:
    if not unix.isdigit():
        raise _ParseError("Invalid Unix time specified")
    if not _DATE_TIME_FORMAT_RE.fullmatch(fmt):
        raise _ParseError("Invalid date-time format specified")
    entity: JSONDict = {
        "type": "date_time",
        "offset": offset,
        "length": length,
        "unix_time": int(unix),
    }
    if fmt:
        entity["date_time_format"] = fmt
    return entity


# ---- MarkdownV2 ----------------------------------------------------------------------------

_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!\n")
_MDV2_NAMES = {
    "bold": "Bold",
    "italic": "Italic",
    "underline": "Underline",
    "strikethrough": "Strikethrough",
    "spoiler": "Spoiler",
    "text_link": "TextUrl",
    "custom": "CustomEmoji",
    "code": "Code",
    "pre": "Pre",
    "blockquote": "BlockQuote",
}


@dataclass
class _MdOpen:
    kind: str
    start: int  # UTF-16 offset in the output
    out_pos: int
    src_pos: int
    language: str = ""
    expandable: bool = False


def _reserved_error(src: str, i: int) -> _ParseError:
    return _ParseError(
        f"Character '{src[i]}' is reserved and must be escaped with the preceding '\\'"
    )


def _read_md_url(src: str, i: int) -> tuple[str, int] | None:
    """Read a (...) URL starting at src[i] == '('; returns the URL and the index after ')'."""
    n = len(src)
    i += 1
    url: list[str] = []
    while i < n and src[i] != ")":
        if src[i] == "\\" and i + 1 < n and 0 < ord(src[i + 1]) <= 126:
            url.append(src[i + 1])
            i += 2
            continue
        url.append(src[i])
        i += 1
    if i >= n:
        return None
    return "".join(url), i + 1


def _parse_markdown_v2(src: str) -> tuple[str, list[JSONDict]]:
    out: list[str] = []
    u16 = 0
    stack: list[_MdOpen] = []
    entities: list[JSONDict] = []
    in_quote = False
    n = len(src)
    i = 0

    def at(k: int) -> str:
        return src[k] if k < n else ""

    def ends(top: _MdOpen, k: int) -> bool:
        c = src[k]
        if top.kind == "bold":
            return c == "*"
        if top.kind == "italic":
            return c == "_" and at(k + 1) != "_"
        if top.kind == "underline":
            return c == "_" and at(k + 1) == "_"
        if top.kind == "strikethrough":
            return c == "~"
        if top.kind == "spoiler":
            return c == "|" and at(k + 1) == "|"
        if top.kind == "code":
            return c == "`"
        if top.kind == "pre":
            return c == "`" and at(k + 1) == "`" and at(k + 2) == "`"
        if top.kind in ("text_link", "custom"):
            return c == "]"
        return False

    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n and 0 < ord(src[i + 1]) <= 126:
            out.append(src[i + 1])
            u16 += 1
            i += 2
            continue
        top = stack[-1] if stack else None
        in_code = top is not None and top.kind in ("code", "pre")
        if (c != "`") if in_code else (c not in _MDV2_RESERVED):
            out.append(c)
            u16 += _units(c)
            i += 1
            continue

        # "||" at the end of a quoted line marks the quote as expandable.
        if (
            top is not None
            and top.kind == "blockquote"
            and c == "|"
            and at(i + 1) == "|"
            and at(i + 2) in ("", "\n")
        ):
            top.expandable = True
            i += 2
            continue

        # Inside a quote, a line that does not start with '>' ends the quote.
        closing = top is not None and (
            (in_quote and c == "\n" and at(i + 1) != ">") or ends(top, i)
        )

        if not closing:
            start_pos = i
            language = ""
            if c == "_":
                kind = "underline" if at(i + 1) == "_" else "italic"
                i += 2 if kind == "underline" else 1
            elif c == "*":
                kind = "bold"
                i += 1
            elif c == "~":
                kind = "strikethrough"
                i += 1
            elif c == "|":
                if at(i + 1) != "|":
                    raise _reserved_error(src, i)
                kind = "spoiler"
                i += 2
            elif c == "[":
                kind = "text_link"
                i += 1
            elif c == "`":
                if at(i + 1) == "`" and at(i + 2) == "`":
                    kind = "pre"
                    i += 3
                    lang_end = i
                    while lang_end < n and not src[lang_end].isspace() and src[lang_end] != "`":
                        lang_end += 1
                    if lang_end > i and lang_end < n and src[lang_end] != "`":
                        language = src[i:lang_end]
                        i = lang_end
                    if at(i) in ("\n", "\r"):
                        pair = at(i + 1)
                        i += 2 if pair in ("\n", "\r") and pair != src[i] else 1
                else:
                    kind = "code"
                    i += 1
            elif c == "!":
                if at(i + 1) != "[":
                    raise _reserved_error(src, i)
                kind = "custom"
                i += 2
            elif c == "\n":
                out.append("\n")
                u16 += 1
                i += 1
                if at(i) == ">":
                    i += 1
                    if not in_quote:
                        in_quote = True
                        stack.append(_MdOpen("blockquote", u16, len(out), i - 1))
                continue
            elif c == ">":
                if in_quote or (out and out[-1] != "\n"):
                    raise _reserved_error(src, i)
                in_quote = True
                stack.append(_MdOpen("blockquote", u16, len(out), i))
                i += 1
                continue
            else:
                raise _reserved_error(src, i)
            stack.append(_MdOpen(kind, u16, len(out), start_pos, language))
            continue

        assert top is not None
        if c == "\n" and top.kind != "blockquote":
            raise _ParseError(
                f"Can't find end of {_MDV2_NAMES[top.kind]} entity at byte offset "
                f"{_byte_offset(src, top.src_pos)}"
            )
        entity: JSONDict | None = None
        length = u16 - top.start
        if top.kind in ("bold", "italic", "code", "strikethrough"):
            i += 1
            entity = {"type": top.kind, "offset": top.start, "length": length}
        elif top.kind in ("underline", "spoiler"):
            i += 2
            entity = {"type": top.kind, "offset": top.start, "length": length}
        elif top.kind == "pre":
            i += 3
            entity = {"type": "pre", "offset": top.start, "length": length}
            if top.language:
                entity["language"] = top.language
        elif top.kind == "text_link":
            i += 1
            if at(i) == "(":
                read = _read_md_url(src, i)
                if read is None:
                    raise _ParseError(
                        f"Can't find end of a URL at byte offset {_byte_offset(src, i + 1)}"
                    )
                url, i = read
            else:
                url = "".join(out[top.out_pos :])
            entity = _link_entity(url, top.start, length)
        elif top.kind == "custom":
            i += 1
            if at(i) != "(":
                raise _ParseError("Custom emoji entity must contain a tg://emoji URL")
            read = _read_md_url(src, i)
            if read is None:
                raise _ParseError(
                    "Can't find end of a custom emoji URL at byte offset "
                    f"{_byte_offset(src, i + 1)}"
                )
            url, i = read
            entity = _custom_md_entity(url, top.start, length)
        else:  # a blockquote ends at a line that does not start with '>'
            in_quote = False
            kind = "expandable_blockquote" if top.expandable else "blockquote"
            entity = {"type": kind, "offset": top.start, "length": length}
            out.append("\n")
            u16 += 1
            i += 1
        stack.pop()
        if entity is not None and length > 0:
            entities.append(entity)

    if stack and stack[-1].kind == "blockquote":
        top = stack.pop()
        if u16 > top.start:
            kind = "expandable_blockquote" if top.expandable else "blockquote"
            entities.append({"type": kind, "offset": top.start, "length": u16 - top.start})
    if stack:
        top = stack[-1]
        raise _ParseError(
            f"Can't find end of {_MDV2_NAMES[top.kind]} entity at byte offset "
            f"{_byte_offset(src, top.src_pos)}"
        )
    return "".join(out), _sort_entities(entities)


def _custom_md_entity(url: str, offset: int, length: int) -> JSONDict:
    emoji = re.fullmatch(r"tg://emoji\?id=(\d+)", url)
    if emoji:
        if int(emoji.group(1)) == 0:
            raise _ParseError("Invalid custom emoji identifier specified")
        return {
            "type": "custom_emoji",
            "offset": offset,
            "length": length,
            "custom_emoji_id": emoji.group(1),
        }
    stamp = re.fullmatch(r"tg://time\?unix=(\d+)(?:&format=([^&]*))?", url)
    if stamp:
        return _date_time_entity(stamp.group(1), stamp.group(2) or "", offset, length)
    raise _ParseError("Custom emoji entity must contain a tg://emoji URL")


# ---- legacy Markdown -----------------------------------------------------------------------


def _parse_markdown(src: str) -> tuple[str, list[JSONDict]]:
    out: list[str] = []
    u16 = 0
    entities: list[JSONDict] = []
    n = len(src)
    i = 0
    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n and src[i + 1] in "_*`[":
            out.append(src[i + 1])
            u16 += 1
            i += 2
            continue
        if c not in "_*`[":
            out.append(c)
            u16 += _units(c)
            i += 1
            continue
        begin = i
        end_char = "]" if c == "[" else c
        i += 1
        is_pre = False
        language = ""
        if c == "`" and src[i : i + 2] == "``":
            is_pre = True
            i += 2
            lang_end = i
            while lang_end < n and not src[lang_end].isspace() and src[lang_end] != "`":
                lang_end += 1
            if lang_end > i and lang_end < n and src[lang_end] != "`":
                language = src[i:lang_end]
                i = lang_end
            if i < n and src[i] in "\r\n":
                pair = src[i + 1] if i + 1 < n else ""
                i += 2 if pair in ("\n", "\r") and pair != src[i] else 1
        start, out_pos = u16, len(out)
        while i < n and (src[i] != end_char or (is_pre and src[i + 1 : i + 3] != "``")):
            out.append(src[i])
            u16 += _units(src[i])
            i += 1
        if i >= n:
            raise _ParseError(
                f"Can't find end of the entity starting at byte offset {_byte_offset(src, begin)}"
            )
        length = u16 - start
        if c == "[":
            if src[i + 1 : i + 2] == "(":
                close = src.find(")", i + 2)
                url = src[i + 2 :] if close < 0 else src[i + 2 : close]
                i = n - 1 if close < 0 else close
            else:
                url = "".join(out[out_pos:])
            link = _link_entity(url, start, length) if length else None
            if link is not None:
                entities.append(link)
        elif length:
            if c == "_":
                entities.append({"type": "italic", "offset": start, "length": length})
            elif c == "*":
                entities.append({"type": "bold", "offset": start, "length": length})
            elif is_pre:
                pre: JSONDict = {"type": "pre", "offset": start, "length": length}
                if language:
                    pre["language"] = language
                entities.append(pre)
            else:
                entities.append({"type": "code", "offset": start, "length": length})
        i += 3 if is_pre else 1
    return "".join(out), _sort_entities(entities)


# ---- explicit entities ---------------------------------------------------------------------


def _validate_entities(text: str, raw: Any) -> list[JSONDict]:
    if raw is None:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise _bad_request("can't parse entities JSON object") from None
    if not isinstance(raw, list):
        raise _bad_request("can't parse entities: entities must be an Array")
    total = utf16_len(text)
    # Offsets that would split a surrogate pair are not character boundaries.
    inside_pairs: set[int] = set()
    pos = 0
    for ch in text:
        if ord(ch) > 0xFFFF:
            inside_pairs.add(pos + 1)
        pos += _units(ch)
    result: list[JSONDict] = []
    for index, entity in enumerate(raw):
        where = f"entity {index}"
        if not isinstance(entity, dict):
            raise _bad_request(f"can't parse entities: {where} must be an Object")
        kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
        if not isinstance(kind, str) or kind not in ENTITY_TYPES:
            raise _bad_request(f"can't parse entities: unsupported entity type {kind!r} in {where}")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise _bad_request(f"can't parse entities: wrong offset in {where}")
        if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
            raise _bad_request(f"can't parse entities: wrong length in {where}")
        if offset + length > total:
            raise _bad_request(
                f"can't parse entities: {where} ({kind}, offset {offset}, length {length}) "
                f"ends after the end of the text ({total} UTF-16 code units)"
            )
        if offset in inside_pairs or (offset + length) in inside_pairs:
            raise _bad_request(
                f"can't parse entities: {where} ({kind}) starts or ends inside a surrogate pair"
            )
        if kind == "text_link":
            url = entity.get("url")
            if not isinstance(url, str) or _link_entity(url, offset, length) is None:
                raise _bad_request(f"can't parse entities: wrong url in {where}")
        elif kind == "text_mention":
            user = entity.get("user")
            if not isinstance(user, dict) or not isinstance(user.get("id"), int):
                raise _bad_request(f"can't parse entities: text_mention {where} needs a user")
        elif kind == "custom_emoji":
            if not str(entity.get("custom_emoji_id", "")).isdigit():
                raise _bad_request(
                    "can't parse entities: Invalid custom emoji identifier specified"
                )
        elif kind == "date_time" and not isinstance(entity.get("unix_time"), int):
            raise _bad_request(f"can't parse entities: date_time {where} needs unix_time")
        result.append(dict(entity))
    return _sort_entities(result)


def _strip_formatted(text: str, entities: list[JSONDict]) -> tuple[str, list[JSONDict]]:
    """Telegram trims surrounding whitespace off message text; entities shift with it."""
    stripped_left = text.lstrip()
    cut = utf16_len(text) - utf16_len(stripped_left)
    result = stripped_left.rstrip()
    total = utf16_len(result)
    kept: list[JSONDict] = []
    for entity in entities:
        start = max(entity["offset"] - cut, 0)
        end = min(entity["offset"] + entity["length"] - cut, total)
        if end > start:
            kept.append({**entity, "offset": start, "length": end - start})
    return result, kept


def parse_formatted_text(
    text: str,
    parse_mode: str | None = None,
    entities: Any = None,
    *,
    strict_html_entities: bool = True,
) -> tuple[str, list[JSONDict]]:
    """Turn (text, parse_mode | entities) into Telegram's (plain text, entities).

    Raises ApiError(400, "Bad Request: can't parse entities: ...") exactly where the fake
    server would, so renderer tests can check their output without a server. Surrounding
    whitespace is not trimmed here (the server does that when it stores a message).
    """
    mode = (parse_mode or "").strip().lower()
    if mode and text:
        try:
            if mode == "html":
                return _parse_html(text, strict_html_entities)
            if mode == "markdownv2":
                return _parse_markdown_v2(text)
            if mode == "markdown":
                return _parse_markdown(text)
        except _ParseError as exc:
            raise _bad_request(f"can't parse entities: {exc}") from None
        raise _bad_request("unsupported parse_mode")
    return text, _validate_entities(text, entities)


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


def _update_type(update: JSONDict) -> str:
    return next((key for key in update if key != "update_id"), "")


def _new_file_ids(kind: str) -> tuple[str, str]:
    # Real ids are opaque base64url blobs; tests must not be able to guess or parse them.
    prefix = {"document": "BQACAgIAAxk", "photo": "AgACAgIAAxk", "voice": "AwACAgIAAxk"}
    file_id = prefix.get(kind, "BAACAgIAAxk") + secrets.token_urlsafe(36)
    return file_id, "AgAD" + secrets.token_urlsafe(9)


class FakeTelegram:
    """A fake Telegram Bot API server (see the module docstring)."""

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_username: str = "picobridge_test_bot",
        bot_first_name: str = "Picobridge Test Bot",
        host: str = "127.0.0.1",
        port: int = 0,
        strict_html_entities: bool = True,
        strict_chats: bool = False,
        first_update_id: int = 100_000,
        max_download_size: int = MAX_DOWNLOAD_SIZE,
        max_upload_size: int = MAX_UPLOAD_SIZE,
    ) -> None:
        # Assign a different token later to simulate a revoked one: every call then gets 401.
        self.token = token
        self.host = host
        self.port = port
        self.strict_html_entities = strict_html_entities
        self.strict_chats = strict_chats
        self.max_download_size = max_download_size
        self.max_upload_size = max_upload_size
        # Seconds added before answering any method but getUpdates, to simulate a slow network.
        self.latency = 0.0
        bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 5123456789
        self.bot_user: JSONDict = {
            "id": bot_id,
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

        self.calls: list[Call] = []
        self.chat_actions: list[ChatAction] = []
        self.drafts: list[Draft] = []
        self.reactions: dict[tuple[int, int], list[JSONDict]] = {}
        self.downloads: list[str] = []
        self.files: dict[str, StoredFile] = {}
        self.chats: dict[int, JSONDict] = {}
        self.updates: dict[int, JSONDict] = {}  # every update ever enqueued, by id
        self.webhook: JSONDict | None = None
        self.commands: dict[tuple[str, str], list[JSONDict]] = {}
        self.allowed_updates: list[str] = []
        self.confirmed_offset = 0
        self.active_polls = 0

        self._next_update_id = first_update_id
        self._queue: list[JSONDict] = []
        self._redeliver: list[JSONDict] = []
        self._messages: dict[tuple[int, int], JSONDict] = {}
        self._sent: list[SentMessage] = []
        self._next_message_id: dict[int, int] = {}
        self._files_by_path: dict[str, StoredFile] = {}
        self._file_counter = 0
        self._blocked: dict[int, str] = {}
        self._faults: dict[str, deque[_Fault]] = {}
        self._stalled: set[str] = set()
        self._release_gen: dict[str, int] = {}
        self._flood_every = 0
        self._flood_retry_after = 1
        self._flood_methods: frozenset[str] = DEFAULT_FLOOD_METHODS
        self._flood_counter = 0
        self._poll_gen = 0
        self._closing = False
        # Every state change replaces this event after setting it: waiters grab the current
        # one, re-check their condition when it fires, and never poll or sleep.
        self._changed_event = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._custom: dict[str, MethodHandler] = {}
        self._methods: dict[str, tuple[str, MethodHandler]] = {}
        for name, handler in {
            "getMe": self._get_me,
            "logOut": self._true,
            "close": self._true,
            "getUpdates": self._get_updates,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "deleteMessage": self._delete_message,
            "deleteMessages": self._delete_messages,
            "sendChatAction": self._send_chat_action,
            "sendMessageDraft": self._send_message_draft,
            "setMessageReaction": self._set_message_reaction,
            "setMyCommands": self._set_my_commands,
            "getMyCommands": self._get_my_commands,
            "deleteMyCommands": self._delete_my_commands,
            "getFile": self._get_file,
            "getChat": self._get_chat,
            **{media: self._make_media_sender(media) for media in _MEDIA_METHODS},
        }.items():
            self._methods[name.lower()] = (name, handler)

    # ---- lifecycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._runner is None:
            raise RuntimeError("FakeTelegram is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """Value for telegram.Bot(base_url=...) and the telegram.base_url setting."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    async def start(self) -> FakeTelegram:
        app = web.Application(client_max_size=self.max_upload_size + 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        # Parked long polls are woken on stop, so nothing should linger past a short timeout.
        # Cancelling handlers of vanished clients keeps active_polls honest after a client
        # gives up on a long poll (as Telegram forgets such a request).
        runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True
        )
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        site = web.SockSite(runner, sock)
        await site.start()
        self._runner = runner
        self._closing = False
        return self

    async def stop(self) -> None:
        self._closing = True
        self._changed()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # ---- waiting -----------------------------------------------------------------------

    def _changed(self) -> None:
        event, self._changed_event = self._changed_event, asyncio.Event()
        event.set()

    async def _wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not predicate():
            event = self._changed_event
            if deadline is None:
                await event.wait()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return predicate()
        return True

    async def wait_for(
        self, predicate: Callable[[], bool], timeout: float = 10.0, what: str | None = None
    ) -> None:
        """Wait until predicate() holds; it is re-checked after every call and state change.

        Raises TimeoutError (listing the last calls) when it does not hold within timeout.
        """
        if await self._wait_until(predicate, timeout):
            return
        recent = ", ".join(call.method for call in self.calls[-15:]) or "none"
        label = what or getattr(predicate, "__name__", "condition")
        raise TimeoutError(f"{label} not met within {timeout}s; last calls: {recent}")

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[JSONDict], bool] | None = None,
        *,
        count: int = 1,
        timeout: float = 10.0,
    ) -> Call:
        """Wait for ``count`` calls of ``method`` (matching predicate); return the last one."""

        def matching() -> list[Call]:
            return [
                c
                for c in self.calls
                if c.method.lower() == method.lower() and (predicate is None or predicate(c.params))
            ]

        await self.wait_for(lambda: len(matching()) >= count, timeout, f"{count} x {method}")
        return matching()[count - 1]

    async def wait_for_messages(
        self, chat_id: int | None = None, count: int = 1, timeout: float = 10.0
    ) -> list[SentMessage]:
        """Wait until the bot has ``count`` visible messages in the chat; return them all."""
        await self.wait_for(
            lambda: len(self.sent_messages(chat_id)) >= count,
            timeout,
            f"{count} message(s) in chat {chat_id}",
        )
        return self.sent_messages(chat_id)

    async def wait_for_poll(self, timeout: float = 10.0) -> None:
        """Wait until a getUpdates long poll is parked in the fake."""
        await self.wait_for(lambda: self.active_polls > 0, timeout, "an active getUpdates")

    async def wait_until_confirmed(self, update_id: int, timeout: float = 10.0) -> None:
        """Wait until the client confirmed ``update_id`` (offset > update_id)."""
        await self.wait_for(
            lambda: self.confirmed_offset > update_id, timeout, f"confirmation of {update_id}"
        )

    # ---- inspecting --------------------------------------------------------------------

    def sent_messages(
        self, chat_id: int | None = None, *, include_deleted: bool = False
    ) -> list[SentMessage]:
        """Messages the bot sent (text and media) in sending order, current state."""
        return [
            m
            for m in self._sent
            if (chat_id is None or m.chat_id == chat_id) and (include_deleted or not m.deleted)
        ]

    def texts(self, chat_id: int | None = None) -> list[str]:
        """The visible text (or caption) of each message the bot sent."""
        return [m.text or m.caption or "" for m in self.sent_messages(chat_id)]

    def calls_to(self, method: str) -> list[JSONDict]:
        return [c.params for c in self.calls if c.method.lower() == method.lower()]

    def message(self, chat_id: int, message_id: int) -> JSONDict | None:
        """The current Message object (user's or bot's) or None when unknown or deleted."""
        return self._messages.get((chat_id, message_id))

    @property
    def pending_updates(self) -> list[JSONDict]:
        """Updates not yet confirmed by an offset."""
        return list(self._queue)

    @property
    def last_update_id(self) -> int:
        return self._next_update_id - 1

    # ---- scripting faults --------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int = 500,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        parameters: JSONDict | None = None,
        body: bytes | None = None,
        times: int | None = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with an error (times=None: until cleared).

        ``method`` is a Bot API method name or "download" for file downloads. Faults queue up
        in order. ``body`` replaces the JSON envelope with raw bytes (e.g. an nginx HTML page).
        """
        params = dict(parameters or {})
        if status == 429 and retry_after is None:
            retry_after = 1
        if retry_after is not None:
            params["retry_after"] = retry_after
        if description is None:
            if status == 429:
                description = f"Too Many Requests: retry after {retry_after}"
            else:
                try:
                    default = HTTPStatus(status).phrase
                except ValueError:
                    default = "Error"
                description = _STATUS_DESCRIPTIONS.get(status, default)
        fault = _Fault("error", status, description, params or None, body, times)
        self._faults.setdefault(method.lower(), deque()).append(fault)

    def stall_next(self, method: str, times: int | None = 1) -> None:
        """Hold the next calls of ``method`` open without answering until release()/stop()."""
        self._faults.setdefault(method.lower(), deque()).append(_Fault("stall", remaining=times))

    def stall(self, method: str) -> None:
        """Hold every call of ``method`` open until release(method)."""
        self._stalled.add(method.lower())

    def release(self, method: str | None = None) -> None:
        """Let stalled calls (of one method, or all) proceed normally; ends stall()."""
        key = method.lower() if method else "*"
        if method is None:
            self._stalled.clear()
        else:
            self._stalled.discard(key)
        self._release_gen[key] = self._release_gen.get(key, 0) + 1
        self._changed()

    def disconnect_next(self, method: str, times: int | None = 1) -> None:
        """Drop the connection of the next calls of ``method`` without any response."""
        fault = _Fault("disconnect", remaining=times)
        self._faults.setdefault(method.lower(), deque()).append(fault)

    def clear_faults(self, method: str | None = None) -> None:
        if method is None:
            self._faults.clear()
        else:
            self._faults.pop(method.lower(), None)
        self.set_flood(0)
        self.release(method)

    def set_flood(
        self, every: int, retry_after: int = 1, methods: Iterable[str] | None = None
    ) -> None:
        """Flood mode: every ``every``-th sending call gets 429 (every=0 turns it off)."""
        self._flood_every = every
        self._flood_retry_after = retry_after
        self._flood_methods = frozenset(methods) if methods is not None else DEFAULT_FLOOD_METHODS
        self._flood_counter = 0

    def block_chat(
        self, chat_id: int, description: str = "Forbidden: bot was blocked by the user"
    ) -> None:
        """Sending anything to the chat answers 403 until unblock_chat()."""
        self._blocked[chat_id] = description

    def unblock_chat(self, chat_id: int) -> None:
        self._blocked.pop(chat_id, None)

    def on(self, method: str, handler: MethodHandler) -> None:
        """Serve ``method`` with handler(params) -> result; raise ApiError for an error."""
        self._custom[method.lower()] = handler

    # ---- users and updates -------------------------------------------------------------

    def add_chat(
        self,
        chat_id: int,
        chat_type: str | None = None,
        *,
        title: str | None = None,
        is_forum: bool = False,
        username: str | None = None,
        first_name: str | None = None,
    ) -> JSONDict:
        """Register (or update) a chat; chat_type defaults from the id like Telegram's ids."""
        if chat_type is None:
            if chat_id > 0:
                chat_type = "private"
            elif str(chat_id).startswith("-100"):
                chat_type = "supergroup"
            else:
                chat_type = "group"
        chat: JSONDict = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name or "Test"
            if username:
                chat["username"] = username
        else:
            chat["title"] = title or f"Test {chat_type} {chat_id}"
            if chat_type == "supergroup" and is_forum:
                chat["is_forum"] = True
        old = self.chats.get(chat_id)
        if old is not None and old.get("is_forum"):
            chat["is_forum"] = True
        self.chats[chat_id] = chat
        return chat

    def _chat(self, chat_id: int) -> JSONDict:
        return self.chats.get(chat_id) or self.add_chat(chat_id)

    def _new_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def enqueue_update(self, update: JSONDict) -> JSONDict:
        """Queue a raw update; update_id is assigned when missing. Returns the update."""
        if "update_id" not in update:
            update = {"update_id": self._next_update_id, **update}
        self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
        self.updates[update["update_id"]] = update
        self._queue.append(update)
        self._changed()
        return update

    def add_file(
        self,
        data: bytes,
        file_name: str | None = None,
        mime_type: str | None = None,
        *,
        kind: str = "document",
        file_size: int | None = None,
        width: int = 0,
        height: int = 0,
        duration: int = 0,
    ) -> StoredFile:
        """Store a file as if a user had sent it; ``file_size`` may claim more than len(data)."""
        self._file_counter += 1
        file_id, unique_id = _new_file_ids(kind)
        ext = ""
        if file_name and "." in file_name:
            ext = "." + file_name.rsplit(".", 1)[1]
        elif kind == "photo":
            ext = ".jpg"
        elif kind == "voice":
            ext = ".oga"
        path = f"{_FILE_PATH_DIRS.get(kind, 'documents')}/file_{self._file_counter}{ext}"
        stored = StoredFile(
            file_id=file_id,
            file_unique_id=unique_id,
            data=bytes(data),
            file_name=file_name,
            mime_type=mime_type,
            file_size=len(data) if file_size is None else file_size,
            file_path=path,
            kind=kind,
            width=width,
            height=height,
            duration=duration,
        )
        self.files[file_id] = stored
        self._files_by_path[path] = stored
        return stored

    def user_message(
        self,
        chat_id: int,
        user_id: int | None = None,
        text: str | None = None,
        *,
        chat_type: str | None = None,
        message_thread_id: int | None = None,
        is_topic_message: bool = False,
        entities: list[JSONDict] | None = None,
        reply_to_message: int | JSONDict | None = None,
        username: str | None = "tester",
        first_name: str = "Test",
        last_name: str | None = None,
        language_code: str | None = "en",
        media_group_id: str | None = None,
        caption: str | None = None,
        caption_entities: list[JSONDict] | None = None,
        document: StoredFile | None = None,
        photo: StoredFile | None = None,
        voice: StoredFile | None = None,
        audio: StoredFile | None = None,
        video: StoredFile | None = None,
        animation: StoredFile | None = None,
        chat_title: str | None = None,
        date: int | None = None,
        enqueue: bool = True,
    ) -> JSONDict:
        """Build (and by default queue) a ``message`` update from a user; returns the update.

        Without ``entities`` the text gets the entities Telegram detects itself (bot_command,
        mention, url), so e.g. "/new" arrives as a command; pass entities=[] to suppress them.
        The message gets the chat's next message_id (shared with the bot's messages there).
        """
        message = self._build_user_message(
            chat_id,
            user_id,
            text,
            chat_type=chat_type,
            message_thread_id=message_thread_id,
            is_topic_message=is_topic_message,
            entities=entities,
            reply_to_message=reply_to_message,
            username=username,
            first_name=first_name,
            last_name=last_name,
            language_code=language_code,
            media_group_id=media_group_id,
            caption=caption,
            caption_entities=caption_entities,
            media={
                "document": document,
                "photo": photo,
                "voice": voice,
                "audio": audio,
                "video": video,
                "animation": animation,
            },
            chat_title=chat_title,
            date=date,
        )
        self._messages[(chat_id, message["message_id"])] = message
        update: JSONDict = {"update_id": self._next_update_id, "message": message}
        if enqueue:
            return self.enqueue_update(update)
        self._next_update_id += 1
        self.updates[update["update_id"]] = update
        return update

    def user_document(
        self,
        chat_id: int,
        user_id: int | None,
        data: bytes,
        file_name: str = "file.bin",
        mime_type: str = "application/octet-stream",
        caption: str | None = None,
        **kwargs: Any,
    ) -> JSONDict:
        stored = self.add_file(data, file_name, mime_type)
        return self.user_message(chat_id, user_id, caption=caption, document=stored, **kwargs)

    def user_photo(
        self,
        chat_id: int,
        user_id: int | None,
        data: bytes,
        caption: str | None = None,
        *,
        width: int = 1280,
        height: int = 960,
        **kwargs: Any,
    ) -> JSONDict:
        stored = self.add_file(data, None, "image/jpeg", kind="photo", width=width, height=height)
        return self.user_message(chat_id, user_id, caption=caption, photo=stored, **kwargs)

    def user_voice(
        self,
        chat_id: int,
        user_id: int | None,
        data: bytes,
        *,
        duration: int = 3,
        mime_type: str = "audio/ogg",
        caption: str | None = None,
        **kwargs: Any,
    ) -> JSONDict:
        stored = self.add_file(data, None, mime_type, kind="voice", duration=duration)
        return self.user_message(chat_id, user_id, caption=caption, voice=stored, **kwargs)

    def edited_message(
        self,
        chat_id: int,
        message_id: int,
        text: str | None = None,
        *,
        caption: str | None = None,
        entities: list[JSONDict] | None = None,
        edit_date: int | None = None,
    ) -> JSONDict:
        """Queue an ``edited_message`` update for a message a user sent earlier."""
        original = self._messages.get((chat_id, message_id))
        if original is None:
            raise KeyError(f"no message {message_id} in chat {chat_id}")
        edited = copy.deepcopy(original)
        edited["edit_date"] = edit_date or int(time.time())
        if text is not None:
            edited["text"] = text
            detected = entities if entities is not None else _detect_entities(text)
            edited.pop("entities", None)
            if detected:
                edited["entities"] = detected
        if caption is not None:
            edited["caption"] = caption
        self._messages[(chat_id, message_id)] = edited
        return self.enqueue_update({"edited_message": edited})

    def redeliver(self, update_id: int) -> JSONDict:
        """Deliver an update again on the next getUpdates, even if it was confirmed."""
        update = self.updates[update_id]
        self._redeliver.append(update)
        self._changed()
        return update

    def _build_user_message(
        self,
        chat_id: int,
        user_id: int | None,
        text: str | None,
        *,
        chat_type: str | None,
        message_thread_id: int | None,
        is_topic_message: bool,
        entities: list[JSONDict] | None,
        reply_to_message: int | JSONDict | None,
        username: str | None,
        first_name: str,
        last_name: str | None,
        language_code: str | None,
        media_group_id: str | None,
        caption: str | None,
        caption_entities: list[JSONDict] | None,
        media: dict[str, StoredFile | None],
        chat_title: str | None,
        date: int | None,
    ) -> JSONDict:
        if user_id is None:
            if chat_id <= 0:
                raise ValueError("user_id is required outside private chats")
            user_id = chat_id
        known = self.chats.get(chat_id)
        if known is None or (chat_type and known["type"] != chat_type) or is_topic_message:
            self.add_chat(
                chat_id,
                chat_type or (known or {}).get("type"),
                title=chat_title,
                is_forum=is_topic_message,
                username=username,
                first_name=first_name,
            )
        sender: JSONDict = {"id": user_id, "is_bot": False, "first_name": first_name}
        if last_name:
            sender["last_name"] = last_name
        if username:
            sender["username"] = username
        if language_code:
            sender["language_code"] = language_code
        message: JSONDict = {
            "message_id": self._new_message_id(chat_id),
            "from": sender,
            "chat": dict(self.chats[chat_id]),
            "date": date or int(time.time()),
        }
        if message_thread_id is not None:
            message["message_thread_id"] = message_thread_id
        if is_topic_message:
            message["is_topic_message"] = True
        if reply_to_message is not None:
            if isinstance(reply_to_message, int):
                replied = self._messages.get((chat_id, reply_to_message))
                if replied is None:
                    raise KeyError(f"no message {reply_to_message} in chat {chat_id} to reply to")
            else:
                replied = reply_to_message
            message["reply_to_message"] = {
                k: v for k, v in replied.items() if k != "reply_to_message"
            }
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        if text is not None:
            message["text"] = text
            found = entities if entities is not None else _detect_entities(text)
            if found:
                message["entities"] = found
        for kind, stored in media.items():
            if stored is not None:
                message.update(self._media_object(kind, stored))
        if caption is not None:
            message["caption"] = caption
            found = caption_entities if caption_entities is not None else _detect_entities(caption)
            if found:
                message["caption_entities"] = found
        return message

    def _media_object(self, kind: str, stored: StoredFile) -> JSONDict:
        base: JSONDict = {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
        }
        if kind == "photo":
            # Telegram sends several sizes, smallest first; only the largest is the original.
            sizes: list[JSONDict] = []
            width = stored.width or 1280
            height = stored.height or 960
            for side in (90, 320):
                if side < max(width, height):
                    scale = side / max(width, height)
                    thumb = self.add_file(stored.data, None, "image/jpeg", kind="photo")
                    sizes.append(
                        {
                            "file_id": thumb.file_id,
                            "file_unique_id": thumb.file_unique_id,
                            "file_size": thumb.file_size,
                            "width": max(1, round(width * scale)),
                            "height": max(1, round(height * scale)),
                        }
                    )
            sizes.append({**base, "width": width, "height": height})
            return {"photo": sizes}
        if stored.mime_type:
            base["mime_type"] = stored.mime_type
        if kind in ("document", "audio", "video", "animation") and stored.file_name:
            base["file_name"] = stored.file_name
        if kind in ("voice", "audio", "video", "animation"):
            base["duration"] = stored.duration
        if kind in ("video", "animation"):
            base["width"] = stored.width or 640
            base["height"] = stored.height or 360
        if kind == "animation":
            # Telegram sets both fields for animations, for clients that predate them.
            doc = {k: v for k, v in base.items() if k not in ("duration", "width", "height")}
            return {"animation": base, "document": doc}
        return {kind: base}

    # ---- HTTP plumbing -----------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _envelope(ApiError(401, "Unauthorized"))
        entry = self._methods.get(request.match_info["method"].lower())
        custom = self._custom.get(request.match_info["method"].lower())
        if entry is None and custom is None:
            return _envelope(ApiError(404, "Not Found"))
        name = entry[0] if entry else request.match_info["method"]
        try:
            params = await self._read_params(request)
        except ApiError as exc:
            return _envelope(exc)
        self.calls.append(Call(name, params, time.monotonic()))
        self._changed()

        scripted = await self._apply_faults(name.lower(), request)
        if scripted is not None:
            return scripted
        if self._flood_every and name in self._flood_methods:
            self._flood_counter += 1
            if self._flood_counter % self._flood_every == 0:
                retry = self._flood_retry_after
                return _envelope(
                    ApiError(429, f"Too Many Requests: retry after {retry}", {"retry_after": retry})
                )
        if self.latency and name != "getUpdates":
            await asyncio.sleep(self.latency)
        handler = custom or (entry[1] if entry else None)
        assert handler is not None
        try:
            result = await handler(params)
        except ApiError as exc:
            return _envelope(exc)
        finally:
            self._changed()
        return web.json_response({"ok": True, "result": result})

    async def _apply_faults(self, key: str, request: web.Request) -> web.StreamResponse | None:
        queue = self._faults.get(key)
        fault = queue[0] if queue else None
        if fault is not None and queue is not None and fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                queue.popleft()
        if key in self._stalled or (fault is not None and fault.kind == "stall"):
            gen = (self._release_gen.get(key, 0), self._release_gen.get("*", 0))
            await self._wait_until(
                lambda: (
                    self._closing
                    or (self._release_gen.get(key, 0), self._release_gen.get("*", 0)) != gen
                ),
                None,
            )
            if self._closing:
                return _envelope(ApiError(502, "Bad Gateway"))
            return None
        if fault is None:
            return None
        if fault.kind == "disconnect":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if fault.body is not None:
            return web.Response(status=fault.status, body=fault.body, content_type="text/html")
        return _envelope(ApiError(fault.status, fault.description or "", fault.parameters))

    async def _read_params(self, request: web.Request) -> JSONDict:
        raw: JSONDict = dict(request.query)
        uploads: dict[str, UploadedFile] = {}
        if request.method == "POST" and request.can_read_body:
            try:
                if request.content_type == "application/json":
                    body = await request.json()
                    if not isinstance(body, dict):
                        raise _bad_request("JSON object expected")
                    raw.update(body)
                elif request.content_type in (
                    "application/x-www-form-urlencoded",
                    "multipart/form-data",
                ):
                    form = await request.post()
                    for key, value in form.items():
                        if isinstance(value, web.FileField):
                            uploads[key] = UploadedFile(
                                value.file.read(), value.filename, value.content_type
                            )
                        else:
                            raw[key] = value
            except web.HTTPRequestEntityTooLarge:
                raise ApiError(413, "Request Entity Too Large") from None
            except ValueError:
                raise _bad_request("can't parse request body") from None
        params: JSONDict = {}
        for key, value in raw.items():
            params[key] = _decode_param(key, value)
        for key, upload in uploads.items():
            params[key] = upload
        # Secondary files (thumbnails, media groups) are referenced as attach://<part name>.
        for key, value in list(params.items()):
            if isinstance(value, str) and value.startswith("attach://"):
                part = uploads.get(value[len("attach://") :])
                if part is None:
                    raise _bad_request(f"file for {key} not found in the request")
                params[key] = part
        return params

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _envelope(ApiError(401, "Unauthorized"))
        scripted = await self._apply_faults("download", request)
        if scripted is not None:
            return scripted
        path = request.match_info["path"]
        stored = self._files_by_path.get(path)
        if stored is None:
            return _envelope(ApiError(404, "Not Found"))
        self.downloads.append(path)
        self._changed()
        return web.Response(body=stored.data, content_type="application/octet-stream")

    # ---- methods -----------------------------------------------------------------------

    async def _true(self, params: JSONDict) -> bool:
        return True

    async def _get_me(self, params: JSONDict) -> JSONDict:
        return dict(self.bot_user)

    def _effective_allowed(self, update: JSONDict) -> bool:
        kind = _update_type(update)
        if self.allowed_updates:
            return kind in self.allowed_updates
        return kind not in _OPT_IN_UPDATE_TYPES

    def _confirm(self, offset: int | None) -> None:
        if not offset:
            return
        if offset > 0:
            self._queue = [u for u in self._queue if u["update_id"] >= offset]
            self.confirmed_offset = max(self.confirmed_offset, offset)
        else:
            self._queue = self._queue[offset:]
            if self._queue:
                self.confirmed_offset = max(self.confirmed_offset, self._queue[0]["update_id"])

    def _deliverable(self) -> bool:
        return bool(self._redeliver) or any(self._effective_allowed(u) for u in self._queue)

    async def _get_updates(self, params: JSONDict) -> list[JSONDict]:
        if self.webhook is not None:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        limit = params.get("limit") or 100
        if not 1 <= limit <= 100:
            limit = 100
        timeout = float(params.get("timeout") or 0)
        if "allowed_updates" in params:
            allowed = params["allowed_updates"]
            if not isinstance(allowed, list):
                raise _bad_request("can't parse allowed_updates JSON object")
            self.allowed_updates = [str(x) for x in allowed]
        # Telegram answers an older, still-waiting getUpdates with 409 when a new one arrives.
        self._poll_gen += 1
        generation = self._poll_gen
        self._confirm(params.get("offset"))
        self.active_polls += 1
        self._changed()
        try:
            await self._wait_until(
                lambda: self._closing or generation != self._poll_gen or self._deliverable(),
                max(timeout, 0.0),
            )
        finally:
            self.active_polls -= 1
        if generation != self._poll_gen:
            raise ApiError(409, _STATUS_DESCRIPTIONS[409])
        result: list[JSONDict] = []
        while self._redeliver and len(result) < limit:
            result.append(self._redeliver.pop(0))
        # Updates the client did not ask for are never generated by Telegram: drop them.
        self._queue = [u for u in self._queue if self._effective_allowed(u)]
        result.extend(self._queue[: limit - len(result)])
        return result

    async def _set_webhook(self, params: JSONDict) -> bool:
        url = params.get("url")
        if not isinstance(url, str):
            raise _bad_request("bad webhook: URL must be provided for webhook")
        if not url:
            self.webhook = None
            return True
        if not url.startswith(("http://", "https://")):
            raise _bad_request("bad webhook: An HTTPS URL must be provided for webhook")
        secret = params.get("secret_token")
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise _bad_request("bad webhook: secret token contains unallowed characters")
        if params.get("drop_pending_updates"):
            self._queue.clear()
        if "allowed_updates" in params and isinstance(params["allowed_updates"], list):
            self.allowed_updates = [str(x) for x in params["allowed_updates"]]
        self.webhook = {k: v for k, v in params.items() if not isinstance(v, UploadedFile)}
        self._poll_gen += 1  # a parked long poll ends with 409, as on Telegram
        return True

    async def _delete_webhook(self, params: JSONDict) -> bool:
        self.webhook = None
        if params.get("drop_pending_updates"):
            self._queue.clear()
        return True

    async def _get_webhook_info(self, params: JSONDict) -> JSONDict:
        info: JSONDict = {
            "url": (self.webhook or {}).get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": len(self._queue),
        }
        if self.webhook and self.webhook.get("allowed_updates"):
            info["allowed_updates"] = self.webhook["allowed_updates"]
        return info

    async def deliver_webhook(self, timeout: float = 10.0) -> int:
        """POST pending updates to the registered webhook like Telegram; returns how many the
        receiver accepted (HTTP 200). Delivery stops at the first refusal."""
        if self.webhook is None:
            raise RuntimeError("no webhook is set")
        headers = {}
        if self.webhook.get("secret_token"):
            headers["X-Telegram-Bot-Api-Secret-Token"] = str(self.webhook["secret_token"])
        delivered = 0
        async with ClientSession(timeout=ClientTimeout(total=timeout)) as session:
            while self._queue:
                update = self._queue[0]
                async with session.post(self.webhook["url"], json=update, headers=headers) as resp:
                    if resp.status != 200:
                        break
                self._queue.pop(0)
                self.confirmed_offset = max(self.confirmed_offset, update["update_id"] + 1)
                delivered += 1
                self._changed()
        return delivered

    def _target_chat(self, params: JSONDict) -> int:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise _bad_request("chat_id is empty")
        if not isinstance(chat_id, int):
            # @channelusername targets are not modelled; the bridge only talks to numeric ids.
            raise _bad_request("chat not found")
        if chat_id in self._blocked:
            raise ApiError(403, self._blocked[chat_id])
        if self.strict_chats and chat_id not in self.chats:
            raise _bad_request("chat not found")
        return chat_id

    def _format(
        self, text: Any, parse_mode: Any, entities: Any, *, limit: int, what: str
    ) -> tuple[str, list[JSONDict]]:
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        plain, found = parse_formatted_text(
            text,
            parse_mode if isinstance(parse_mode, str) else None,
            entities,
            strict_html_entities=self.strict_html_entities,
        )
        plain, found = _strip_formatted(plain, found)
        if utf16_len(plain) > limit:
            raise _bad_request(f"{what} is too long")
        return plain, found

    def _reply_target(self, chat_id: int, params: JSONDict) -> JSONDict | None:
        reply = params.get("reply_parameters")
        allow_missing = bool(params.get("allow_sending_without_reply"))
        if isinstance(reply, dict):
            message_id = reply.get("message_id")
            allow_missing = allow_missing or bool(reply.get("allow_sending_without_reply"))
            reply_chat = reply.get("chat_id", chat_id)
        else:
            message_id = params.get("reply_to_message_id")
            reply_chat = chat_id
        if message_id is None:
            return None
        target = (
            self._messages.get((reply_chat, message_id)) if isinstance(reply_chat, int) else None
        )
        if target is None:
            if allow_missing:
                return None
            raise _bad_request("message to be replied not found")
        return {k: v for k, v in target.items() if k != "reply_to_message"}

    def _bot_message(self, chat_id: int, params: JSONDict) -> JSONDict:
        message: JSONDict = {
            "message_id": self._new_message_id(chat_id),
            "from": dict(self.bot_user),
            "chat": dict(self._chat(chat_id)),
            "date": int(time.time()),
        }
        thread = params.get("message_thread_id")
        if thread is not None:
            message["message_thread_id"] = thread
            if self._chat(chat_id).get("is_forum"):
                message["is_topic_message"] = True
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        return message

    def _record_sent(
        self,
        message: JSONDict,
        kind: str,
        params: JSONDict,
        stored: StoredFile | None,
    ) -> None:
        reply = message.get("reply_to_message")
        markup = params.get("reply_markup")
        self._messages[(message["chat"]["id"], message["message_id"])] = message
        self._sent.append(
            SentMessage(
                chat_id=message["chat"]["id"],
                message_id=message["message_id"],
                kind=kind,
                text=message.get("text"),
                raw_text=params.get("text"),
                caption=message.get("caption"),
                raw_caption=params.get("caption"),
                parse_mode=params.get("parse_mode"),
                entities=list(message.get("entities") or message.get("caption_entities") or []),
                reply_to_message_id=reply["message_id"] if reply else None,
                message_thread_id=params.get("message_thread_id"),
                file=stored,
                reply_markup=markup if isinstance(markup, dict) else None,
                params=params,
                date=message["date"],
                raw=message,
            )
        )

    async def _send_message(self, params: JSONDict) -> JSONDict:
        chat_id = self._target_chat(params)
        text, entities = self._format(
            params.get("text"),
            params.get("parse_mode"),
            params.get("entities"),
            limit=MAX_TEXT_LENGTH,
            what="message",
        )
        if not text:
            raise _bad_request("message text is empty")
        reply = self._reply_target(chat_id, params)
        message = self._bot_message(chat_id, params)
        message["text"] = text
        if entities:
            message["entities"] = entities
        if reply is not None:
            message["reply_to_message"] = reply
        if isinstance(params.get("link_preview_options"), dict):
            message["link_preview_options"] = params["link_preview_options"]
        self._record_sent(message, "text", params, None)
        return message

    def _make_media_sender(self, method: str) -> MethodHandler:
        kind = _MEDIA_METHODS[method]

        async def send(params: JSONDict) -> JSONDict:
            return await self._send_media(kind, params)

        return send

    async def _send_media(self, kind: str, params: JSONDict) -> JSONDict:
        chat_id = self._target_chat(params)
        value = params.get(kind)
        if value is None or value == "":
            raise _bad_request(f"there is no {kind} in the request")
        if isinstance(value, UploadedFile):
            if not value.data:
                raise _bad_request("file must be non-empty")
            stored = self.add_file(
                value.data,
                value.filename,
                value.content_type,
                kind=kind,
                width=params.get("width") or 0,
                height=params.get("height") or 0,
                duration=params.get("duration") or 0,
            )
        elif isinstance(value, str) and value in self.files:
            stored = self.files[value]
        elif isinstance(value, str) and value.startswith(("http://", "https://")):
            raise _bad_request("failed to get HTTP URL content")
        else:
            raise _bad_request("wrong file identifier/HTTP URL specified")
        caption, caption_entities = self._format(
            params.get("caption"),
            params.get("parse_mode"),
            params.get("caption_entities"),
            limit=MAX_CAPTION_LENGTH,
            what="message caption",
        )
        reply = self._reply_target(chat_id, params)
        message = self._bot_message(chat_id, params)
        message.update(self._media_object(kind, stored))
        if caption:
            message["caption"] = caption
        if caption_entities:
            message["caption_entities"] = caption_entities
        if reply is not None:
            message["reply_to_message"] = reply
        self._record_sent(message, kind, params, stored)
        return message

    def _editable(self, params: JSONDict) -> tuple[JSONDict, SentMessage]:
        if params.get("inline_message_id") is not None:
            raise _bad_request("message to edit not found")
        chat_id = self._target_chat(params)
        message_id = params.get("message_id")
        if message_id is None:
            raise _bad_request("message identifier is not specified")
        message = self._messages.get((chat_id, message_id))
        if message is None:
            raise _bad_request("message to edit not found")
        sent = next(
            (
                m
                for m in self._sent
                if m.chat_id == chat_id and m.message_id == message_id and not m.deleted
            ),
            None,
        )
        if sent is None:
            raise _bad_request("message can't be edited")
        return message, sent

    async def _edit_message_text(self, params: JSONDict) -> JSONDict:
        text, entities = self._format(
            params.get("text"),
            params.get("parse_mode"),
            params.get("entities"),
            limit=MAX_TEXT_LENGTH,
            what="message",
        )
        if not text:
            raise _bad_request("message text is empty")
        message, sent = self._editable(params)
        if "text" not in message:
            raise _bad_request("there is no text in the message to edit")
        markup = params.get("reply_markup")
        new_markup = markup if isinstance(markup, dict) and "inline_keyboard" in markup else None
        if (
            message.get("text") == text
            and (message.get("entities") or []) == entities
            and message.get("reply_markup") == new_markup
        ):
            raise ApiError(400, _NOT_MODIFIED)
        edited = dict(message)
        edited["text"] = text
        edited.pop("entities", None)
        if entities:
            edited["entities"] = entities
        edited.pop("reply_markup", None)
        if new_markup is not None:
            edited["reply_markup"] = new_markup
        edited["edit_date"] = int(time.time())
        self._messages[(sent.chat_id, sent.message_id)] = edited
        sent.edits.append(sent.text)
        sent.text = text
        sent.raw_text = params.get("text")
        sent.parse_mode = params.get("parse_mode")
        sent.entities = list(entities)
        sent.reply_markup = new_markup
        sent.raw = edited
        return edited

    def _delete(self, chat_id: int, message_id: Any) -> bool:
        if not isinstance(message_id, int) or (chat_id, message_id) not in self._messages:
            return False
        del self._messages[(chat_id, message_id)]
        for sent in self._sent:
            if sent.chat_id == chat_id and sent.message_id == message_id:
                sent.deleted = True
        return True

    async def _delete_message(self, params: JSONDict) -> bool:
        chat_id = self._target_chat(params)
        if not self._delete(chat_id, params.get("message_id")):
            raise _bad_request("message to delete not found")
        return True

    async def _delete_messages(self, params: JSONDict) -> bool:
        chat_id = self._target_chat(params)
        ids = params.get("message_ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 100:
            raise _bad_request("message_ids must be a list of 1-100 identifiers")
        for message_id in ids:
            self._delete(chat_id, message_id)
        return True

    async def _send_chat_action(self, params: JSONDict) -> bool:
        chat_id = self._target_chat(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise _bad_request("wrong parameter action in request")
        self.chat_actions.append(
            ChatAction(chat_id, str(action), params.get("message_thread_id"), time.monotonic())
        )
        return True

    async def _send_message_draft(self, params: JSONDict) -> bool:
        chat_id = self._target_chat(params)
        if chat_id <= 0:
            raise _bad_request("drafts can be sent only to private chats")
        draft_id = params.get("draft_id")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise _bad_request("draft_id must be non-zero")
        text, entities = self._format(
            params.get("text"),
            params.get("parse_mode"),
            params.get("entities"),
            limit=MAX_TEXT_LENGTH,
            what="message",
        )
        self.drafts.append(
            Draft(
                chat_id, draft_id, text, entities, params.get("message_thread_id"), time.monotonic()
            )
        )
        return True

    async def _set_message_reaction(self, params: JSONDict) -> bool:
        chat_id = self._target_chat(params)
        message_id = params.get("message_id")
        if not isinstance(message_id, int) or (chat_id, message_id) not in self._messages:
            raise _bad_request("MESSAGE_ID_INVALID")
        reaction = params.get("reaction") or []
        if not isinstance(reaction, list):
            raise _bad_request("can't parse reaction JSON object")
        if len(reaction) > 1:
            raise _bad_request("REACTIONS_TOO_MANY")
        for item in reaction:
            if not isinstance(item, dict) or item.get("type") not in (
                "emoji",
                "custom_emoji",
                "paid",
            ):
                raise _bad_request("REACTION_INVALID")
            if item["type"] == "emoji" and item.get("emoji") not in _reaction_emoji():
                raise _bad_request("REACTION_INVALID")
            if item["type"] == "custom_emoji" and not str(item.get("custom_emoji_id")).isdigit():
                raise _bad_request("REACTION_INVALID")
        self.reactions[(chat_id, message_id)] = reaction
        return True

    @staticmethod
    def _commands_key(params: JSONDict) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    async def _set_my_commands(self, params: JSONDict) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise _bad_request("can't parse commands JSON object")
        if len(commands) > 100:
            raise _bad_request("too many commands")
        clean: list[JSONDict] = []
        for command in commands:
            if not isinstance(command, dict):
                raise _bad_request("can't parse BotCommand")
            name, description = command.get("command"), command.get("description")
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise _bad_request("BOT_COMMAND_INVALID")
            if not isinstance(description, str) or not 1 <= len(description.strip()) <= 256:
                raise _bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
            clean.append({"command": name, "description": description})
        self.commands[self._commands_key(params)] = clean
        return True

    async def _get_my_commands(self, params: JSONDict) -> list[JSONDict]:
        return list(self.commands.get(self._commands_key(params), []))

    async def _delete_my_commands(self, params: JSONDict) -> bool:
        self.commands.pop(self._commands_key(params), None)
        return True

    async def _get_file(self, params: JSONDict) -> JSONDict:
        file_id = params.get("file_id")
        if not file_id:
            raise _bad_request("file_id is empty")
        stored = self.files.get(str(file_id))
        if stored is None:
            raise _bad_request("invalid file_id")
        if stored.file_size > self.max_download_size:
            raise _bad_request("file is too big")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
            "file_path": stored.file_path,
        }

    async def _get_chat(self, params: JSONDict) -> JSONDict:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int) or chat_id not in self.chats:
            raise _bad_request("chat not found")
        return {**self.chats[chat_id], "accent_color_id": 0, "max_reaction_count": 11}


def _envelope(error: ApiError) -> web.Response:
    return web.json_response(error.envelope(), status=error.status)


def _decode_param(key: str, value: Any) -> Any:
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
            raise _bad_request(f"can't parse {key} JSON object") from None
        raise _bad_request(f"invalid {key} specified") from None
    if key in _BOOL_FIELDS:
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0", ""):
            return False
        raise _bad_request(f"invalid {key} specified")
    return value


_COMMAND_RE = re.compile(r"(?<![\w/<>])/[a-zA-Z0-9_]{1,64}(?:@[a-zA-Z0-9_]{3,32})?(?![\w/<>])")
_MENTION_RE = re.compile(r"(?<!\w)@[a-zA-Z0-9_]{2,32}(?!\w)")
_URL_RE = re.compile(r"https?://[^\s<>\"]+", re.IGNORECASE)


def _detect_entities(text: str) -> list[JSONDict]:
    """The entities Telegram adds to a user's message on its own (the ones bots rely on)."""
    found: list[JSONDict] = []
    for kind, pattern in (("bot_command", _COMMAND_RE), ("mention", _MENTION_RE), ("url", _URL_RE)):
        for match in pattern.finditer(text):
            offset = utf16_len(text[: match.start()])
            found.append({"type": kind, "offset": offset, "length": utf16_len(match.group())})
    # A URL or command swallows the mentions inside it (e.g. /start@bot).
    result: list[JSONDict] = []
    for entity in _sort_entities(found):
        if result and entity["offset"] < result[-1]["offset"] + result[-1]["length"]:
            continue
        result.append(entity)
    return result


_REACTIONS: frozenset[str] | None = None


def _reaction_emoji() -> frozenset[str]:
    global _REACTIONS
    if _REACTIONS is None:
        try:
            from telegram.constants import ReactionEmoji
        except ImportError:  # the list is Telegram's data; PTB just happens to ship it
            _REACTIONS = frozenset({"👍", "👎", "❤", "🔥", "👀", "🤔", "✍", "🙏", "👌", "⚡"})
        else:
            _REACTIONS = frozenset(e.value for e in ReactionEmoji)
    return _REACTIONS
