"""Markdown -> Slack mrkdwn.

Library: markdown-to-mrkdwn (``SlackMarkdownConverter``), kept for the
line-level rewrites it gets right: ``**b**``/``__b__`` -> ``*b*``, ``*i*`` ->
``_i_``, ``***x***`` -> ``*_x_*``, ``~~s~~`` -> ``~s~``, headings -> a bold line,
``-``/``*`` bullets (nesting kept by indentation) and task lists -> ``•``,
``☐``, ``☑``, tables -> ``*h* | *h*`` rows, rules -> a line.  It is a set of
regexes, not a parser, and on tricky input it goes wrong in ways this module
works around (each checked against the installed 0.3.3):

- It escapes nothing, and Slack needs ``&``, ``<``, ``>`` as entities.  Text is
  escaped before conversion (a line's leading ``>`` quote marker excepted), so
  the links written here are the only raw angle brackets.
- It rewrites inside inline code and URLs (``a__b__c`` -> ``a*b*c``), cuts
  ``[t](u_(x))`` at the first ``)`` and turns ``[a](b c)`` into a broken
  link.  Code spans, URLs and backslash escapes become placeholders it cannot
  touch, and links are written here; only a link's label is left to it.
- It only knows fences written exactly ``` or ```word: ``~~~``, ```c++ and an
  indented closing fence left the rest of the reply "in code" or converted
  code lines (``# x`` -> ``*x*``).  Fences are found with
  :func:`adapters.textsplit.find_fences` and written here as plain ``` blocks
  (no info string: Slack has no highlighting and would show it as code).
  Slack has no escape for ``` inside code, so a zero-width space breaks it.
- ``**`` inside a heading came out as ``*Title *x**``: heading emphasis is
  dropped, the whole heading being bold anyway.
- It splits lines with ``str.splitlines``, turning U+2028 and friends into
  newlines: those are protected too.

Remaining limits: ``+`` bullets stay as typed, intraword ``__x__`` still turns
bold, a backslash-escaped ``*`` is a plain ``*`` that Slack may read as markup,
and Slack's own rule that ``*``/``_`` need word boundaries still applies.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator

from markdown_to_mrkdwn import SlackMarkdownConverter

from picobridge.adapters.common.textsplit import (
    Fence,
    find_fences,
    iter_split_markdown,
    split_markdown,
)
from picobridge.contract import scrub_surrogates

log = logging.getLogger(__name__)

SLACK_LIMIT = 3900
_MIN_LIMIT = 10  # room for one escaped character ("&amp;"), twice

_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_BACKSLASH = re.compile(r"\\([!-/:-@\[-`{-~])")
_LINK = re.compile(
    r"(!?)\[((?:[^\[\]\\\n]|\\.)*)\]\([ \t]*"
    r"(<[^<>\n]*>|(?!<)(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))+)"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*\)"
)
# Slack has no escape for ```: a zero-width space keeps backtick runs below three.
_BACKTICK_RUN = re.compile(r"`(?=``)")
_LEFTOVER_LINK = re.compile(r"\]\(")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>")
_BARE_URL = re.compile(r"(?<![\w/])(?:https?|ftp)://[^\s<>]+")
_URL_TRAILER = re.compile(r"[.,;:!?'\")\]*_~]+$")
_ODD_BREAK = re.compile(r"[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_HEADING_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1")
_QUOTE_PREFIX = re.compile(r"(?:[ \t]*>)*")
_PLACEHOLDER_CHARS = range(0xE000, 0xF900)


def render_slack(markdown: str, limit: int = SLACK_LIMIT) -> list[str]:
    """Render Markdown into mrkdwn messages of at most ``limit`` characters.

    Never raises on any text: when conversion fails, the escaped raw text is
    sent instead.  Whitespace-only input gives ``[]``.
    """
    _check_limit(limit)
    markdown = scrub_surrogates(markdown)
    try:
        return list(_rendered(markdown, limit))
    except Exception as exc:  # a converter bug must not cost the user the reply
        log.warning("slack rendering failed (%s); sending plain text", type(exc).__name__)
        return list(_plain(markdown, limit))


def escape(text: str) -> str:
    """Escape the three characters Slack reserves for its markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Convert one Markdown text (no length limit) to mrkdwn."""
    parts: list[str] = []
    cursor = 0
    for fence in find_fences(markdown):
        parts.append(_text_to_mrkdwn(markdown[cursor : fence.start]))
        parts.append(_code_to_mrkdwn(markdown, fence))
        cursor = fence.end
    parts.append(_text_to_mrkdwn(markdown[cursor:]))
    return "\n".join(part for part in parts if part)


def _check_limit(limit: int) -> None:
    if limit < _MIN_LIMIT:
        raise ValueError(f"limit must be at least {_MIN_LIMIT}, got {limit}")


def _rendered(markdown: str, limit: int) -> Iterator[str]:
    # The splitter returns a piece it has just probed: remember the last few conversions so
    # a short reply is converted once, not twice.
    memo: dict[str, str] = {}

    def convert(piece: str) -> str:
        if piece not in memo:
            if len(memo) >= 8:
                memo.clear()
            memo[piece] = to_mrkdwn(piece)
        return memo[piece]

    for piece in iter_split_markdown(markdown, lambda p: len(convert(p)) <= limit):
        text = convert(piece)
        if text.strip():
            yield text
        else:
            # Renders to nothing (an empty code block): the user must still
            # get something, so they get the source, its fences defused.
            yield from (_BACKTICK_RUN.sub("`\u200b", raw) for raw in _plain(piece, limit // 2))


def _plain(markdown: str, limit: int) -> Iterator[str]:
    pieces = split_markdown(markdown, lambda p: len(escape(p)) <= limit)
    return (escape(piece) for piece in pieces)


def _code_to_mrkdwn(markdown: str, fence: Fence) -> str:
    body = markdown[fence.body_start : fence.body_end].removesuffix("\n")
    if not body.strip():
        return ""
    width = len(fence.indent) if "\t" not in fence.indent else 0
    lines = [_dedent(line, width) for line in body.split("\n")]
    code = _BACKTICK_RUN.sub("`\u200b", escape("\n".join(lines)))
    return f"```\n{code}\n```"


def _dedent(line: str, width: int) -> str:
    # CommonMark strips up to the fence's own indentation from each code line.
    strip = len(line[:width]) - len(line[:width].lstrip(" "))
    return line[strip:]


class _Placeholders:
    """Stand-ins the converter's regexes leave alone, restored afterwards."""

    def __init__(self, text: str) -> None:
        free = (chr(c) for c in _PLACEHOLDER_CHARS if chr(c) not in text)
        self.open, self.close = next(free), next(free)
        self.values: list[str] = []
        self.pattern = re.compile(re.escape(self.open) + r"(\d+)" + re.escape(self.close))

    def add(self, value: str) -> str:
        self.values.append(value)
        return f"{self.open}{len(self.values) - 1}{self.close}"

    def sub(self, pattern: re.Pattern[str], make: Callable[[re.Match[str]], str], text: str) -> str:
        return pattern.sub(lambda m: self.add(make(m)), text)

    def restore(self, text: str) -> str:
        # A value may hold earlier placeholders (a link target with an
        # escaped character): each pass unwraps one level.
        for _ in range(len(self.values)):
            text, count = self.pattern.subn(lambda m: self.values[int(m.group(1))], text)
            if not count:
                break
        return text


def _text_to_mrkdwn(text: str) -> str:
    if not text.strip():
        return ""
    store = _Placeholders(text)
    text = text.replace("\r\n", "\n")
    text = store.sub(_CODE_SPAN, lambda m: f"`{escape(m.group(2))}`", text)
    text = store.sub(_BACKSLASH, lambda m: escape(m.group(1)), text)
    text = _LINK.sub(lambda m: _link(m, store), text)
    # Any "](" left is not a link we vetted (a space in the target, say): hide
    # it from the converter's own, looser link regex.
    text = store.sub(_LEFTOVER_LINK, lambda m: m.group(0), text)
    text = store.sub(_AUTOLINK, _autolink, text)
    text = _BARE_URL.sub(lambda m: _bare_url(m.group(0), store), text)
    text = store.sub(_ODD_BREAK, lambda m: m.group(0), text)
    text = _HEADING.sub(_plain_heading, text)
    text = "\n".join(_escape_line(line) for line in text.split("\n"))
    # Outside our code blocks a ``` (typed, or formed by restored pieces)
    # would open one in Slack.
    return _BACKTICK_RUN.sub("`\u200b", store.restore(SlackMarkdownConverter().convert(text)))


def _slack_url(url: str) -> str:
    # Inside <url|text> a raw "|" or ">" would end the URL early.
    url = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E")
    return url.replace("|", "%7C").replace(" ", "%20")


def _link_url(target: str) -> str:
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    return _slack_url(_BACKSLASH.sub(r"\1", target))


def _link(m: re.Match[str], store: _Placeholders) -> str:
    """Write the link ourselves; only its label is left to the converter."""
    image, label, url = m.group(1), m.group(2), _link_url(m.group(3))
    if image:
        alt = store.restore(escape(label))
        return store.add(f"<{url}|{alt}>" if alt.strip() else f"<{url}>")
    if not label.strip():
        return store.add(f"<{url}>")
    return store.add(f"<{url}|") + label + store.add(">")


def _autolink(m: re.Match[str]) -> str:
    target = m.group(1)
    if ":" in target.split("@", 1)[0] or "@" not in target:
        return f"<{_slack_url(target)}>"
    return f"<mailto:{_slack_url(target)}|{escape(target)}>"


def _bare_url(url: str, store: _Placeholders) -> str:
    trailer = _URL_TRAILER.search(url)
    cut = trailer.start() if trailer else len(url)
    return store.add(_slack_url(url[:cut])) + url[cut:]


def _plain_heading(m: re.Match[str]) -> str:
    return m.group(1) + " " + _HEADING_EMPHASIS.sub(r"\2", m.group(2))


def _escape_line(line: str) -> str:
    quote = _QUOTE_PREFIX.match(line)
    keep = quote.end() if quote else 0
    return line[:keep] + escape(line[keep:])
