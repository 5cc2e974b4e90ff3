"""Fenced code blocks in Markdown source, found with a line scanner close to CommonMark.

``` or ~~~ opens a fence, a line of the same character at least as long closes it. The
renderer's own parser is not used: the splitter needs positions in the source, line by line.
Fences inside block quotes are not seen, so such blocks may be cut like text (nothing is
lost, the piece just renders differently).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r"([ \t]*)(`{3,}|~{3,})(.*)")
# After a closing fence only spaces and tabs (CommonMark), and the "\r" of a CRLF line: not
# every character str.isspace knows (U+2028 after the fence leaves the block open).
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t\r]*")


@dataclass(frozen=True, slots=True)
class Fence:
    """A fenced code block, positions as indices into the source."""

    start: int  # start of the opening fence line
    body_start: int  # start of the first body line
    body_end: int  # start of the closing fence line, or len(source) when unclosed
    end: int  # end of the closing fence line (its "\n" excluded)
    open_line: str  # the opening fence line as written
    marker: str  # the fence characters, e.g. "```" or "~~~~"
    indent: str  # whitespace before the opening fence
    closed: bool


@dataclass(frozen=True, slots=True)
class Line:
    start: int
    end: int  # index of the terminating "\n", or len(source)
    kind: str  # "text", "blank", "open", "body", "close"


def small_indent(indent: str) -> bool:
    # Up to three spaces keep a fence a fence at top level; more (or a tab)
    # would turn it into an indented code block once out of its list item.
    return "\t" not in indent and len(indent) <= 3


def _opening(line: str) -> re.Match[str] | None:
    m = _FENCE_OPEN.fullmatch(line)
    if m is None or (m.group(2)[0] == "`" and "`" in m.group(3)):
        return None
    return m


def _closes(line: str, marker: str) -> bool:
    m = _FENCE_CLOSE.fullmatch(line)
    return m is not None and m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker)


def scan_lines(text: str) -> tuple[list[Line], list[Fence]]:
    """Classify every line (split on "\\n" only) and collect the fences."""
    lines: list[Line] = []
    fences: list[Fence] = []
    open_match: re.Match[str] | None = None
    open_start = body_start = 0
    pos = 0
    while pos <= len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        line = text[pos:end]
        if open_match is None:
            open_match = _opening(line)
            if open_match is not None:
                open_start, body_start = pos, min(end + 1, len(text))
                lines.append(Line(pos, end, "open"))
            else:
                lines.append(Line(pos, end, "text" if line.strip() else "blank"))
        elif _closes(line, open_match.group(2)):
            fences.append(_fence(open_match, open_start, body_start, pos, end, closed=True))
            lines.append(Line(pos, end, "close"))
            open_match = None
        else:
            lines.append(Line(pos, end, "body"))
        if nl < 0:
            break
        pos = nl + 1
    if open_match is not None:
        fences.append(_fence(open_match, open_start, body_start, len(text), len(text), False))
    return lines, fences


def _fence(
    m: re.Match[str], start: int, body_start: int, body_end: int, end: int, closed: bool
) -> Fence:
    return Fence(start, body_start, body_end, end, m.group(0), m.group(2), m.group(1), closed)


def find_fences(text: str) -> list[Fence]:
    """The fenced code blocks of ``text``, in order (as this module sees them)."""
    return scan_lines(text)[1]
