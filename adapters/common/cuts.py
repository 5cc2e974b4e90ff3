"""Where Markdown source may be cut, computed once per split: between blocks, between lines,
between words, and (the last resort) anywhere inside a line, with what a piece that starts or
ends inside a fenced code block needs to be re-fenced."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Protocol

from picobridge.adapters.common.fences import Fence, Line, scan_lines, small_indent

_NON_SPACE = re.compile(r"\S")
_INLINE_SPACE = re.compile(r"[^\S\n]+")


@dataclass(frozen=True, slots=True)
class Code:
    """Where a fence may be cut, and how a cut piece is re-fenced."""

    start: int
    # Positions strictly between these two are "in code": from the first to
    # the last non-blank body line, so no piece holds only blank code lines.
    inner_start: int
    inner_end: int
    reopen: str
    marker: str
    # End of the closing fence's text; -1 when unclosed or empty (nothing to
    # normalise).
    close_end: int


class Cuts(Protocol):
    """Candidate cut points of one level inside the current search window."""

    def __len__(self) -> int: ...
    def p(self, i: int) -> int: ...
    def index_before(self, x: int) -> int: ...


@dataclass(slots=True)
class CutList:
    ps: list[int]
    lo: int
    hi: int

    def __len__(self) -> int:
        return self.hi - self.lo

    def p(self, i: int) -> int:
        return self.ps[self.lo + i]

    def index_before(self, x: int) -> int:
        return bisect.bisect_right(self.ps, x, self.lo, self.hi) - 1 - self.lo


@dataclass(slots=True)
class Positions:
    """Every position of some disjoint inclusive intervals, indexable."""

    spans: list[tuple[int, int]]
    counts: list[int] = field(default_factory=list)  # cumulative, one per span

    def __post_init__(self) -> None:
        total = 0
        for a, b in self.spans:
            total += b - a + 1
            self.counts.append(total)

    def __len__(self) -> int:
        return self.counts[-1] if self.counts else 0

    def p(self, i: int) -> int:
        k = bisect.bisect_right(self.counts, i)
        before = self.counts[k - 1] if k else 0
        return self.spans[k][0] + i - before

    def index_before(self, x: int) -> int:
        k = bisect.bisect_right(self.spans, x, key=lambda span: span[0]) - 1
        if k < 0:
            return -1
        a, b = self.spans[k]
        before = self.counts[k - 1] if k else 0
        return before + min(x, b) - a


class Doc:
    """The source plus its cut points, computed once per split."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines, fences = scan_lines(text)
        self.codes = [self._code(f) for f in fences]
        self.code_starts = [c.start for c in self.codes]
        self.block: tuple[list[int], list[int]] = ([], [])
        self.line: tuple[list[int], list[int]] = ([], [])
        self._word: tuple[list[int], list[int]] | None = None
        self._interiors: list[tuple[int, int]] | None = None
        self._boundaries()

    def _code(self, f: Fence) -> Code:
        body = self._body_lines(f)
        inner_start = body[0].start if body else f.body_start
        inner_end = body[-1].end if body else f.body_start
        keep = small_indent(f.indent)
        reopen = f.open_line if keep else f.open_line.lstrip()
        close_end = -1
        if f.closed and body:
            close_end = f.body_end + len(self.text[f.body_end : f.end].rstrip())
        return Code(f.start, inner_start, inner_end, reopen, f.marker, close_end)

    def _body_lines(self, f: Fence) -> list[Line]:
        text = self.text
        i = bisect.bisect_left(self.lines, f.body_start, key=lambda ln: ln.start)
        body: list[Line] = []
        lines = self.lines
        while i < len(lines) and lines[i].kind == "body" and lines[i].end <= f.body_end:
            body.append(lines[i])
            i += 1
        while body and not text[body[0].start : body[0].end].strip():
            body.pop(0)
        while body and not text[body[-1].start : body[-1].end].strip():
            body.pop()
        return body

    def closed_at(self, p: int) -> Code | None:
        """The fence whose closing line ends at ``p``, if any."""
        k = bisect.bisect_right(self.code_starts, p) - 1
        return self.codes[k] if k >= 0 and self.codes[k].close_end == p else None

    def code_at(self, x: int) -> Code | None:
        k = bisect.bisect_right(self.code_starts, x) - 1
        if k >= 0 and self.codes[k].inner_start < x < self.codes[k].inner_end:
            return self.codes[k]
        return None

    def next_content(self, x: int) -> int:
        m = _NON_SPACE.search(self.text, x)
        return m.start() if m else len(self.text)

    def content_end(self, ln: Line) -> int:
        return ln.start + len(self.text[ln.start : ln.end].rstrip())

    def _boundaries(self) -> None:
        prev: Line | None = None
        gap = False
        for ln in self.lines:
            if ln.kind == "blank":
                gap = True
                continue
            if prev is not None:
                self._boundary(prev, ln, gap)
            prev, gap = ln, False
        end = len(self.text.rstrip())
        self.block[0].append(end)
        self.block[1].append(len(self.text))

    def _boundary(self, a: Line, b: Line, gap: bool) -> None:
        if a.kind == "open" or b.kind == "close":
            return
        if a.kind == "body":
            if self.code_at(a.end) is not None:
                self.line[0].append(a.end)
                self.line[1].append(a.end + 1)
            return
        level = self.block if gap or a.kind == "close" or b.kind == "open" else self.line
        level[0].append(self.content_end(a))
        level[1].append(self._start_of(b))

    def _start_of(self, ln: Line) -> int:
        if ln.kind == "open" and small_indent(self._indent(ln)):
            return ln.start
        return self.next_content(ln.start)

    def _indent(self, ln: Line) -> str:
        line = self.text[ln.start : ln.end]
        return line[: len(line) - len(line.lstrip())]

    def word(self) -> tuple[list[int], list[int]]:
        if self._word is None:
            self._word = self._word_cuts()
        return self._word

    def _word_cuts(self) -> tuple[list[int], list[int]]:
        ps: list[int] = []
        qs: list[int] = []
        for ln in self.lines:
            if ln.kind not in ("text", "body"):
                continue
            in_code = ln.kind == "body"
            stop = ln.end if in_code else self.content_end(ln)
            for m in _INLINE_SPACE.finditer(self.text, ln.start, stop):
                if m.start() == ln.start or m.end() == stop:
                    continue
                if in_code:
                    if self.code_at(m.end()) is not None:
                        ps.append(m.end())
                        qs.append(m.end())
                else:
                    ps.append(m.start())
                    qs.append(m.end())
        return ps, qs

    def interiors(self) -> list[tuple[int, int]]:
        """Inclusive spans of positions strictly inside text and code lines."""
        if self._interiors is None:
            spans: list[tuple[int, int]] = []
            for ln in self.lines:
                # Cutting inside the indentation would leave a piece of blanks.
                first = self.next_content(ln.start) + 1
                cuttable = ln.kind == "text" or (ln.kind == "body" and self.code_at(first))
                if cuttable and first <= ln.end - 1:
                    spans.append((first, ln.end - 1))
            self._interiors = spans
        return self._interiors


def clip(spans: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The parts of sorted disjoint inclusive ``spans`` inside [lo, hi]."""
    k = max(0, bisect.bisect_right(spans, lo, key=lambda span: span[0]) - 1)
    out: list[tuple[int, int]] = []
    while k < len(spans) and spans[k][0] <= hi:
        a, b = max(spans[k][0], lo), min(spans[k][1], hi)
        if a <= b:
            out.append((a, b))
        k += 1
    return out
