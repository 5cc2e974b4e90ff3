"""Split Markdown source into pieces whose *rendered* form fits a platform limit.

The limit applies to what the platform receives (Telegram text after entity
extraction, Slack mrkdwn after escaping), which is not proportional to the
source, so the caller passes a ``fits`` predicate over a source piece and this
module only decides where to cut.

Cut points, best first: between blocks (blank line, or around a fenced code
block), between lines, between words, anywhere.  A fenced code block is cut
only when it does not fit on its own; each piece of it is then closed and
re-opened with the same info string so it still renders as code.  Whitespace at
a cut point is dropped (Markdown gives it no meaning there, and a piece that
starts indented would turn into an indented code block), except inside code,
where nothing is dropped but the line break the cut replaces, and before a
fence indented up to three spaces (its code lines dedent by that indent).

The search is greedy: for each piece, a gallop plus binary search over the
candidate cut points of one level, seeded with the previous piece's length, so
a piece costs O(log n) ``fits`` calls; a block much longer than a piece is
first bounded by doubling raw cuts, so no call renders far more than a piece.
A 1 MB reply stays fast even when rendering is slow.  ``fits`` is assumed
roughly monotone; when it is not, each piece still fits, it is merely not the
longest possible.

Fences are recognised with a line scanner close to CommonMark (``` or ~~~,
closing fence of the same character and at least the same length), not with
the renderer's parser: fences inside block quotes are not seen, so such blocks
may be cut like text (nothing is lost, the piece just renders differently).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

Fits = Callable[[str], bool]

_FENCE_OPEN = re.compile(r"([ \t]*)(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})\s*")
_NON_SPACE = re.compile(r"\S")
_INLINE_SPACE = re.compile(r"[^\S\n]+")
_PROBE = 1024  # first raw piece length tried when nothing better is known


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
class _Line:
    start: int
    end: int  # index of the terminating "\n", or len(source)
    kind: str  # "text", "blank", "open", "body", "close"


def _small_indent(indent: str) -> bool:
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


def _scan(text: str) -> tuple[list[_Line], list[Fence]]:
    """Classify every line (split on "\\n" only) and collect the fences."""
    lines: list[_Line] = []
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
                lines.append(_Line(pos, end, "open"))
            else:
                lines.append(_Line(pos, end, "text" if line.strip() else "blank"))
        elif _closes(line, open_match.group(2)):
            fences.append(_fence(open_match, open_start, body_start, pos, end, closed=True))
            lines.append(_Line(pos, end, "close"))
            open_match = None
        else:
            lines.append(_Line(pos, end, "body"))
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
    return _scan(text)[1]


@dataclass(frozen=True, slots=True)
class _Code:
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


class _Cuts(Protocol):
    """Candidate cut points of one level inside the current search window."""

    def __len__(self) -> int: ...
    def p(self, i: int) -> int: ...
    def index_before(self, x: int) -> int: ...


@dataclass(slots=True)
class _CutList:
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
class _Positions:
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


class _Doc:
    """The source plus its cut points, computed once per split."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines, fences = _scan(text)
        self.codes = [self._code(f) for f in fences]
        self.code_starts = [c.start for c in self.codes]
        self.block: tuple[list[int], list[int]] = ([], [])
        self.line: tuple[list[int], list[int]] = ([], [])
        self._word: tuple[list[int], list[int]] | None = None
        self._interiors: list[tuple[int, int]] | None = None
        self._boundaries()

    def _code(self, f: Fence) -> _Code:
        body = self._body_lines(f)
        inner_start = body[0].start if body else f.body_start
        inner_end = body[-1].end if body else f.body_start
        keep = _small_indent(f.indent)
        reopen = f.open_line if keep else f.open_line.lstrip()
        close_end = -1
        if f.closed and body:
            close_end = f.body_end + len(self.text[f.body_end : f.end].rstrip())
        return _Code(f.start, inner_start, inner_end, reopen, f.marker, close_end)

    def _body_lines(self, f: Fence) -> list[_Line]:
        text = self.text
        i = bisect.bisect_left(self.lines, f.body_start, key=lambda ln: ln.start)
        body: list[_Line] = []
        lines = self.lines
        while i < len(lines) and lines[i].kind == "body" and lines[i].end <= f.body_end:
            body.append(lines[i])
            i += 1
        while body and not text[body[0].start : body[0].end].strip():
            body.pop(0)
        while body and not text[body[-1].start : body[-1].end].strip():
            body.pop()
        return body

    def closed_at(self, p: int) -> _Code | None:
        """The fence whose closing line ends at ``p``, if any."""
        k = bisect.bisect_right(self.code_starts, p) - 1
        return self.codes[k] if k >= 0 and self.codes[k].close_end == p else None

    def code_at(self, x: int) -> _Code | None:
        k = bisect.bisect_right(self.code_starts, x) - 1
        if k >= 0 and self.codes[k].inner_start < x < self.codes[k].inner_end:
            return self.codes[k]
        return None

    def next_content(self, x: int) -> int:
        m = _NON_SPACE.search(self.text, x)
        return m.start() if m else len(self.text)

    def content_end(self, ln: _Line) -> int:
        return ln.start + len(self.text[ln.start : ln.end].rstrip())

    def _boundaries(self) -> None:
        prev: _Line | None = None
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

    def _boundary(self, a: _Line, b: _Line, gap: bool) -> None:
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

    def _start_of(self, ln: _Line) -> int:
        if ln.kind == "open" and _small_indent(self._indent(ln)):
            return ln.start
        return self.next_content(ln.start)

    def _indent(self, ln: _Line) -> str:
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


@dataclass(slots=True)
class _Splitter:
    doc: _Doc
    fits: Fits
    guess: int = 0  # raw length of the previous piece: the next is likely similar

    def piece(self, s: int, p: int, wrap: bool = True) -> str:
        text = self.doc.text
        head = self.doc.code_at(s) if wrap else None
        tail = self.doc.code_at(p) if wrap else None
        body = text[s:p] if tail is not None else text[s:p].rstrip()
        ending = self.doc.closed_at(p) if wrap else None
        if ending is not None and ending.start <= s < ending.inner_end:
            # A piece made of (the end of) one fence gets a normalised closing
            # fence: the original may sit under an indent we stripped from the
            # opening, and trailing blank code lines need not fit.
            body = text[s : ending.inner_end] + "\n" + self.close(s, ending)
        prefix = head.reopen + "\n" if head is not None else ""
        suffix = "\n" + self.close(s, tail) if tail is not None else ""
        return prefix + body + suffix

    def close(self, s: int, code: _Code) -> str:
        """A closing fence indented like the opening one this piece starts with."""
        inside = s >= code.inner_start
        opening = code.reopen if inside else self.doc.text[s : self.doc.next_content(s)]
        return opening[: len(opening) - len(opening.lstrip())] + code.marker

    def pieces(self) -> Iterator[str]:
        text = self.doc.text
        s = self.doc.next_content(0)
        stop = len(text.rstrip())
        while s < stop:
            piece, p, q = self.next_piece(s)
            yield piece
            self.guess, s = p - s, q

    def next_piece(self, s: int) -> tuple[str, int, int]:
        doc = self.doc
        first = doc.next_content(s)
        hi = len(doc.text) + 1
        next_block = doc.block[0][bisect.bisect_right(doc.block[0], first)]
        if next_block - first > 4 * max(self.guess, _PROBE):
            hi = self.ceiling(s, first)
        for ps, qs in (doc.block, doc.line, doc.word()):
            lo_i = bisect.bisect_right(ps, first)
            hi_i = bisect.bisect_left(ps, hi, lo_i)
            cuts = _CutList(ps, lo_i, hi_i)
            i = self.furthest(s, cuts, wrap=True)
            if i >= 0:
                p = cuts.p(i)
                return self.piece(s, p), p, qs[lo_i + i]
            if len(cuts):
                hi = cuts.p(0)
        return self.hard_cut(s, first, hi)

    def ceiling(self, s: int, first: int) -> int:
        """A position no fitting piece from ``s`` reaches, found cheaply.

        Trying the next block cut of a huge block would render all of it for
        every piece (quadratic); doubling raw cuts costs a few renders of about
        the size of a piece instead.
        """
        step = max(self.guess, _PROBE)
        while first + step < len(self.doc.text):
            if not self.fits(self.piece(s, first + step)):
                return first + step
            step *= 2
        return len(self.doc.text) + 1

    def hard_cut(self, s: int, first: int, hi: int) -> tuple[str, int, int]:
        doc = self.doc
        inside = _Positions(_clip(doc.interiors(), first + 1, hi - 1))
        i = self.furthest(s, inside, wrap=True)
        if i >= 0:
            p = inside.p(i)
            return self.piece(s, p), p, self.resume(p)
        # Last resort, for fence lines longer than the limit: cut anywhere and
        # leave the pieces unfenced rather than fail.
        last = min(hi, len(doc.text))
        anywhere = _Positions([(first + 1, last)] if first < last else [])
        i = self.furthest(first, anywhere, wrap=False)
        if i < 0:
            raise ValueError(f"not even one character fits at offset {first}")
        p = anywhere.p(i)
        return self.piece(first, p, wrap=False), p, self.resume(p)

    def resume(self, p: int) -> int:
        return p if self.doc.code_at(p) is not None else self.doc.next_content(p)

    def furthest(self, s: int, cuts: _Cuts, wrap: bool) -> int:
        """Index of the furthest cut whose piece fits, or -1."""
        n = len(cuts)
        if n == 0:
            return -1
        probe = max(0, min(cuts.index_before(s + self.guess), n - 1)) if self.guess else 0

        def ok(i: int) -> bool:
            return self.fits(self.piece(s, cuts.p(i), wrap))

        return _gallop(n, probe, ok)


def _clip(spans: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The parts of sorted disjoint inclusive ``spans`` inside [lo, hi]."""
    k = max(0, bisect.bisect_right(spans, lo, key=lambda span: span[0]) - 1)
    out: list[tuple[int, int]] = []
    while k < len(spans) and spans[k][0] <= hi:
        a, b = max(spans[k][0], lo), min(spans[k][1], hi)
        if a <= b:
            out.append((a, b))
        k += 1
    return out


def _gallop(n: int, probe: int, ok: Callable[[int], bool]) -> int:
    """Largest i in [0, n) with ok(i), for ok true then false; -1 if none.

    Starts at ``probe`` and gallops outwards so a good guess costs ~2 calls.
    """
    if ok(probe):
        good, bad, step = probe, n, 1
        while good + step < bad:
            if not ok(good + step):
                bad = good + step
                break
            good, step = good + step, step * 2
    else:
        good, bad, step = -1, probe, 1
        while bad - step > good:
            if ok(bad - step):
                good = bad - step
                break
            bad, step = bad - step, step * 2
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good



def iter_split_markdown(text: str, fits: Fits) -> Iterator[str]:
    """Lazily yield the pieces of :func:`split_markdown`."""
    if text and not text[0].isspace() and not text[-1].isspace() and fits(text):
        return iter((text,))  # most replies: one piece, no need to look for cuts
    return _Splitter(_Doc(text), fits).pieces()


def split_markdown(text: str, fits: Fits) -> list[str]:
    """Split Markdown ``text`` into pieces, each satisfying ``fits``.

    Pieces never start or end with whitespace outside code; whitespace-only
    input gives no piece.  Raises ValueError when not even one character fits.
    """
    return list(iter_split_markdown(text, fits))
