"""Markdown -> Telegram messages (plain text + MessageEntity lists).

Library: telegramify-markdown 1.x ``convert()``.  It parses with pyromark
(pulldown-cmark, real CommonMark + tables/strikethrough/tasks/math) and returns
plain text plus entities with UTF-16 offsets, so no MarkdownV2 escaping can go
wrong and a formatting mistake can never make Telegram reject the message.

What it does not do, and how this module copes:

- Raw HTML is silently dropped (``<script>x</script>`` vanishes, ``a <b> c``
  loses ``<b>``) and entity references are decoded (``&copy;`` -> ``©``).  The
  agent writes chat text, not HTML, so ``<`` and ``&`` outside code, math and
  autolinks are backslash-escaped before conversion and reach the user as typed.
- Its own splitters (``split_entities``, ``telegramify()``) cut at any newline,
  code blocks included, and ``telegramify()`` turns every code block into a
  file; we cut the *source* with :mod:`adapters.textsplit` instead, so code
  blocks stay whole where they fit and are re-fenced where they do not.
- Cutting the source means each piece is parsed alone: reference-style link
  definitions in another piece are not seen, and an emphasis or list that
  spans a cut (only when a paragraph exceeds the limit) renders per piece.
- Headings get the library's emoji prefix and bold/underline; tables become a
  monospace ``pre`` block (cell formatting dropped); images become a 🖼 link.
- Telegram ignores entities past the 100th: that is a second limit on a piece.
  It also rejects messages whose entities are "too long" (many long link
  URLs); that is not predicted here, the caller falls back to plain text.
- Telegram strips whitespace at both ends of a message; trimming here first
  keeps the entity offsets right (a code block's first-line indent at the very
  start of a message is therefore lost).
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from telegram import MessageEntity

from picobridge.contract import scrub_surrogates

# The converter and its parser (telegramify_markdown, pyromark: about 1.9 MB resident), and our
# splitter (adapters.common.textsplit), are imported by the first reply, not by an idle daemon:
# the import statements in these functions cost a dictionary lookup once they are loaded.
if TYPE_CHECKING:
    import pyromark
    import telegramify_markdown

log = logging.getLogger(__name__)

TELEGRAM_LIMIT = 4096
# Telegram silently ignores the formatting after a message's 100th entity.
MAX_ENTITIES = 100
_MIN_LIMIT = 2  # one astral-plane character takes two UTF-16 units
_UNESCAPED = re.compile(r"(?<!\\)((?:\\\\)*)([<&])")
_LITERAL_LINKS = ("Autolink", "Email")


@dataclass(frozen=True, slots=True)
class TelegramChunk:
    """One message: text plus entities, offsets in UTF-16 code units."""

    text: str
    entities: tuple[MessageEntity, ...]


def utf16_len(text: str) -> int:
    # surrogatepass: never raise, even on text that skipped scrub_surrogates.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def render_telegram(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[TelegramChunk]:
    """Render Markdown into Telegram chunks of at most ``limit`` UTF-16 units.

    Never raises on any text: when the converter fails, the raw text is sent
    instead (see :func:`plain_chunks`).  Whitespace-only input gives ``[]``.
    """
    _check_limit(limit)
    markdown = scrub_surrogates(markdown)
    try:
        return list(_rendered(markdown, limit))
    except Exception as exc:  # a library bug must not cost the user the reply
        log.warning("telegram rendering failed (%s); sending plain text", type(exc).__name__)
        return [TelegramChunk(text, ()) for text in plain_chunks(markdown, limit)]


def plain_chunks(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """The raw Markdown split at ``limit`` UTF-16 units, for sending without entities.

    Used when Telegram rejects the entities; cuts still avoid code blocks.
    """
    from picobridge.adapters.common.textsplit import split_markdown

    _check_limit(limit)
    markdown = scrub_surrogates(markdown)
    return split_markdown(markdown, lambda piece: utf16_len(piece) <= limit)


def needs_file(markdown: str, limit: int = TELEGRAM_LIMIT, max_chunks: int = 5) -> bool:
    """True when the reply would take more than ``max_chunks`` messages.

    Stops rendering as soon as the answer is known, so a huge reply is cheap.
    """
    _check_limit(limit)
    markdown = scrub_surrogates(markdown)
    try:
        count = _count(_rendered(markdown, limit), max_chunks + 1)
    except Exception:
        count = _count(_plain(markdown, limit), max_chunks + 1)
    return count > max_chunks


def _check_limit(limit: int) -> None:
    if limit < _MIN_LIMIT:
        raise ValueError(f"limit must be at least {_MIN_LIMIT}, got {limit}")


def _count(items: Iterator[object], cap: int) -> int:
    return sum(1 for _ in itertools.islice(items, cap))


def _plain(markdown: str, limit: int) -> Iterator[str]:
    from picobridge.adapters.common.textsplit import iter_split_markdown

    return iter_split_markdown(markdown, lambda piece: utf16_len(piece) <= limit)


def _rendered(markdown: str, limit: int) -> Iterator[TelegramChunk]:
    from picobridge.adapters.common.textsplit import iter_split_markdown

    def fits(piece: str) -> bool:
        text, entities = _convert(piece)
        return utf16_len(text) <= limit and len(entities) <= MAX_ENTITIES

    for piece in iter_split_markdown(markdown, fits):
        text, entities = _convert(piece)
        if text:
            yield TelegramChunk(text, tuple(_to_ptb(e) for e in entities))
        else:
            # Renders to nothing (an empty code block, an empty link): the
            # source is all the user could get, and they must get something.
            yield from (TelegramChunk(raw, ()) for raw in _plain(piece, limit))


@functools.cache
def _config() -> telegramify_markdown.RenderConfig:
    import telegramify_markdown

    return telegramify_markdown.RenderConfig.isolated()


@functools.cache
def _parser_options() -> pyromark.Options:
    """The converter's own parser options (a from-import of a submodule, unlike a plain
    import of a loaded module, costs about 0.7 us at each call)."""
    from telegramify_markdown.converter import STANDARD_OPTIONS

    return STANDARD_OPTIONS


def _convert(markdown: str) -> tuple[str, list[Any]]:
    """Convert one piece and trim it the way Telegram will."""
    import telegramify_markdown

    text, entities = telegramify_markdown.convert(escape_html(markdown), config=_config())
    return _trim(text, entities)


def _trim(text: str, entities: list[Any]) -> tuple[str, list[Any]]:
    stripped = text.strip()
    if stripped == text:
        return text, entities
    if not stripped:
        return "", []
    shift = utf16_len(text[: len(text) - len(text.lstrip())])
    size = utf16_len(stripped)
    kept: list[Any] = []
    for e in entities:
        start = max(e.offset - shift, 0)
        end = min(e.offset + e.length - shift, size)
        if end > start:
            kept.append(e.copy_with(offset=start, length=end - start))
    return stripped, kept


def _to_ptb(entity: Any) -> MessageEntity:
    # user/unix_time/date_time_format never come out of Markdown: not carried.
    return MessageEntity(
        type=entity.type,
        offset=entity.offset,
        length=entity.length,
        url=entity.url,
        language=entity.language,
        custom_emoji_id=entity.custom_emoji_id,
    )


def escape_html(markdown: str) -> str:
    """Backslash-escape ``<`` and ``&`` outside code, math and autolinks.

    The converter drops raw HTML and decodes entity references; the agent
    means these characters literally.
    """
    if "<" not in markdown and "&" not in markdown:
        return markdown
    data = markdown.encode("utf-8")
    parts: list[str] = []
    cursor = 0
    for start, end in _literal_ranges(markdown):
        parts.append(_UNESCAPED.sub(r"\1\\\2", data[cursor:start].decode("utf-8")))
        parts.append(data[start:end].decode("utf-8"))
        cursor = end
    parts.append(_UNESCAPED.sub(r"\1\\\2", data[cursor:].decode("utf-8")))
    return "".join(parts)


def _literal_ranges(markdown: str) -> list[tuple[int, int]]:
    """UTF-8 byte ranges the parser reads literally, merged and in order."""
    import pyromark

    ranges: list[tuple[int, int]] = []
    for payload, span in pyromark.events_with_range(markdown, options=_parser_options()):
        if _is_literal(payload):
            ranges.append((span["start"], span["end"]))
    ranges.sort()
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _is_literal(payload: object) -> bool:
    if not isinstance(payload, dict):
        return False
    if "Code" in payload or "InlineMath" in payload or "DisplayMath" in payload:
        return True
    start = payload.get("Start")
    if not isinstance(start, dict):
        return False
    if "CodeBlock" in start:
        return True
    link = start.get("Link")
    return isinstance(link, dict) and link.get("link_type") in _LITERAL_LINKS
