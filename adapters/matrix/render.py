"""Agent Markdown -> a Matrix message: `formatted_body` in org.matrix.custom.html (rendered by
pyromark, the CommonMark parser the Telegram renderer also uses) with the Markdown kept as the
plain `body`, as Matrix clients do themselves.

Raw HTML in the agent's text is shown as text, never passed on as markup (it could hide or
fake content); single line breaks stay line breaks, as people expect in a chat.
"""

from __future__ import annotations

import json
from typing import Any

import pyromark

from picobridge.adapters.common.textsplit import split_markdown

HTML_FORMAT = "org.matrix.custom.html"
OPTIONS = (pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH
           | pyromark.Options.ENABLE_TASKLISTS)
# A Matrix event may be 65,536 bytes as a whole (JSON, signatures, relations); a part keeps
# its body and formatted body well below that.
PART_BYTES = 24_000


def _prepared(markdown: str) -> str:
    """The source with raw HTML escaped and soft line breaks made hard."""
    edits: list[tuple[int, int, str]] = []
    for event, span in pyromark.events_with_range(markdown, options=OPTIONS):
        start, end = span["start"], span["end"]
        if isinstance(event, dict) and ("Html" in event or "InlineHtml" in event):
            edits.append((start, end, markdown[start:end].replace("<", "&lt;")))
        elif event == "SoftBreak":
            newline = markdown.find("\n", start, max(end, start + 1))
            if newline >= 0:
                edits.append((newline, newline, "\\"))
    if not edits:
        return markdown
    out: list[str] = []
    at = 0
    for start, end, text in sorted(edits):
        out.append(markdown[at:start])
        out.append(text)
        at = end
    out.append(markdown[at:])
    return "".join(out)


def to_html(markdown: str) -> str:
    return pyromark.html(_prepared(markdown), options=OPTIONS).strip()


def message_content(markdown: str, msgtype: str = "m.text") -> dict[str, Any]:
    """A message's content: the Markdown as `body`, its HTML as `formatted_body`."""
    return {"msgtype": msgtype, "body": markdown, "format": HTML_FORMAT,
            "formatted_body": to_html(markdown)}


def content_bytes(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False).encode("utf-8"))


def fits(piece: str, limit: int = PART_BYTES) -> bool:
    return content_bytes(message_content(piece)) <= limit


def split(markdown: str, limit: int = PART_BYTES) -> list[str]:
    """The Markdown in pieces whose message fits `limit` bytes, code blocks never cut open."""
    return split_markdown(markdown, lambda piece: fits(piece, limit))
