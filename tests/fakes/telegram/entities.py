"""Text and entities as Telegram checks them: UTF-16 lengths and offsets, the entity types and
their fields, surrounding whitespace trimmed, and the entities Telegram finds in users' text.

picobridge sends plain text with an explicit ``entities`` list and never a ``parse_mode``
(adapters/telegram/send.py, progress.py), so the fake does not parse HTML or MarkdownV2: a
request with a parse_mode is refused, so that starting to send one cannot go unnoticed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.server import JSON
from tests.fakes.telegram.model import ApiError, bad_request

ENTITY_TYPES = frozenset({
    "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold",
    "italic", "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote",
    "code", "pre", "text_link", "text_mention", "custom_emoji", "date_time",
})
_LINK_SCHEMES = frozenset({"http", "https", "tg", "ton"})
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_DOMAIN_RE = re.compile(r"^[\w-]+(\.[\w-]+)+(:\d+)?([/?#].*)?$")


def utf16_len(text: str) -> int:
    """Length of ``text`` as Telegram counts it: UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _sorted(entities: list[JSON]) -> list[JSON]:
    return sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def _link_ok(url: str) -> bool:
    """Whether Telegram keeps a text_link to ``url`` (a known scheme, or a bare domain)."""
    url = url.strip()
    scheme = _SCHEME_RE.match(url)
    if scheme:
        return scheme.group(1).lower() in _LINK_SCHEMES
    return bool(_DOMAIN_RE.match(url))


def _pair_middles(text: str) -> set[int]:
    """UTF-16 offsets that fall inside a surrogate pair (not character boundaries)."""
    middles: set[int] = set()
    pos = 0
    for ch in text:
        if ord(ch) > 0xFFFF:
            middles.add(pos + 1)
            pos += 2
        else:
            pos += 1
    return middles


def _entity_error(entity: Any, where: str, total: int, middles: set[int]) -> str | None:
    """What is wrong with one entity, in Telegram's words, or None."""
    if not isinstance(entity, dict):
        return f"{where} must be an Object"
    kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
    if not isinstance(kind, str) or kind not in ENTITY_TYPES:
        return f"unsupported entity type {kind!r} in {where}"
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        return f"wrong offset in {where}"
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
        return f"wrong length in {where}"
    if offset + length > total:
        return (f"{where} ({kind}, offset {offset}, length {length}) ends after the end of "
                f"the text ({total} UTF-16 code units)")
    if offset in middles or offset + length in middles:
        return f"{where} ({kind}) starts or ends inside a surrogate pair"
    if kind == "text_link" and not (isinstance(entity.get("url"), str)
                                    and _link_ok(entity["url"])):
        return f"wrong url in {where}"
    if kind == "text_mention" and not (isinstance(entity.get("user"), dict)
                                       and isinstance(entity["user"].get("id"), int)):
        return f"text_mention {where} needs a user"
    if kind == "custom_emoji" and not str(entity.get("custom_emoji_id", "")).isdigit():
        return "Invalid custom emoji identifier specified"
    if kind == "date_time" and not isinstance(entity.get("unix_time"), int):
        return f"date_time {where} needs unix_time"
    return None


def validate_entities(text: str, raw: Any) -> list[JSON]:
    """The entities of a request, checked against ``text``; 400 "can't parse entities" if bad."""
    if raw is None:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise bad_request("can't parse entities JSON object") from None
    if not isinstance(raw, list):
        raise bad_request("can't parse entities: entities must be an Array")
    total, middles = utf16_len(text), _pair_middles(text)
    for index, entity in enumerate(raw):
        problem = _entity_error(entity, f"entity {index}", total, middles)
        if problem is not None:
            raise bad_request(f"can't parse entities: {problem}")
    return _sorted([dict(entity) for entity in raw])


def strip_formatted(text: str, entities: list[JSON]) -> tuple[str, list[JSON]]:
    """Telegram trims surrounding whitespace off message text; entities shift with it."""
    stripped_left = text.lstrip()
    cut = utf16_len(text) - utf16_len(stripped_left)
    result = stripped_left.rstrip()
    total = utf16_len(result)
    kept: list[JSON] = []
    for entity in entities:
        start = max(entity["offset"] - cut, 0)
        end = min(entity["offset"] + entity["length"] - cut, total)
        if end > start:
            kept.append({**entity, "offset": start, "length": end - start})
    return result, kept


def formatted_text(text: Any, parse_mode: Any, entities: Any, *, limit: int,
                   what: str) -> tuple[str, list[JSON]]:
    """(text, entities) of a request as Telegram stores them, or the 400 Telegram answers."""
    if parse_mode not in (None, ""):
        # Not Telegram's behaviour but the fake's limit, worded so that the product's
        # "formatting refused, send plain text" fallback does not hide it.
        raise ApiError(400, f"Bad Request: the fake does not model markup mode {parse_mode!r}")
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    plain, found = strip_formatted(text, validate_entities(text, entities))
    if utf16_len(plain) > limit:
        raise bad_request(f"{what} is too long")
    return plain, found


_COMMAND_RE = re.compile(r"(?<![\w/<>])/[a-zA-Z0-9_]{1,64}(?:@[a-zA-Z0-9_]{3,32})?(?![\w/<>])")
_MENTION_RE = re.compile(r"(?<!\w)@[a-zA-Z0-9_]{2,32}(?!\w)")
_URL_RE = re.compile(r"https?://[^\s<>\"]+", re.IGNORECASE)


def detect_entities(text: str) -> list[JSON]:
    """The entities Telegram adds to a user's message on its own (the ones bots rely on)."""
    found: list[JSON] = []
    for kind, pattern in (("bot_command", _COMMAND_RE), ("mention", _MENTION_RE),
                          ("url", _URL_RE)):
        for match in pattern.finditer(text):
            offset = utf16_len(text[: match.start()])
            found.append({"type": kind, "offset": offset, "length": utf16_len(match.group())})
    # A URL or command swallows the mentions inside it (e.g. /start@bot).
    result: list[JSON] = []
    for entity in _sorted(found):
        if result and entity["offset"] < result[-1]["offset"] + result[-1]["length"]:
            continue
        result.append(entity)
    return result
