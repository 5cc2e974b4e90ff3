"""Agent Markdown as Discord shows it, split at Discord's 2,000 characters.

Discord renders Markdown itself (bold, italics, code, fenced blocks with languages, quotes,
lists, headings, masked links), so the text is kept as the agent wrote it. What Discord would
render that Markdown does not mean is escaped outside code: `<@id>`, `<#id>`, `<@&id>` and
`<t:...>` would turn into mentions, channel links and timestamps; `@everyone` and `@here`
would ping (the client also sends `allowed_mentions` with nothing allowed, so nobody is
pinged whatever slips through); `||text||` would hide it as a spoiler. Pieces are cut with the
shared Markdown splitter, never inside a code block without closing and reopening it.
"""

from __future__ import annotations

import re

from picobridge.adapters.common.fences import find_fences
from picobridge.adapters.common.textsplit import split_markdown

DISCORD_LIMIT = 2000
EMPTY_REPLY = "_(the agent sent an empty answer)_"

_SPECIAL = re.compile(r"<(?=[@#]|t:|a?:\w+:\d)|@(?=everyone|here)|\|\|")
_INLINE_CODE = re.compile(r"(`+)(?:.|\n)+?\1")


def _escape_text(text: str) -> str:
    out, last = [], 0
    for match in _INLINE_CODE.finditer(text):
        out.append(_escape_plain(text[last:match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape_plain(text[last:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    return _SPECIAL.sub(lambda m: "\\" + m.group(0) if m.group(0) != "||" else "\\|\\|", text)


def escape(markdown: str) -> str:
    """Escape Discord's own syntax outside fenced and inline code."""
    fences = find_fences(markdown)
    out, last = [], 0
    for fence in fences:
        out.append(_escape_text(markdown[last:fence.start]))
        out.append(markdown[fence.start:fence.end])
        last = fence.end
    out.append(_escape_text(markdown[last:]))
    return "".join(out)


def render(markdown: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """The messages a reply takes on Discord, each within `limit` characters."""
    text = escape(markdown.replace("\r\n", "\n")).strip("\n")
    if not text.strip():
        return []
    return split_markdown(text, lambda piece: len(piece) <= limit)
