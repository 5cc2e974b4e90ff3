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
The scanner is in fences.py, the cut points of a document in cuts.py; this module
decides where each piece ends.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from picobridge.adapters.common.cuts import Code, CutList, Cuts, Doc, Positions, clip
from picobridge.adapters.common.fences import Fence, find_fences

__all__ = ["Fence", "Fits", "find_fences", "iter_split_markdown", "split_markdown"]

Fits = Callable[[str], bool]

_PROBE = 1024  # first raw piece length tried when nothing better is known


@dataclass(slots=True)
class _Splitter:
    doc: Doc
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

    def close(self, s: int, code: Code) -> str:
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
            cuts = CutList(ps, lo_i, hi_i)
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
        inside = Positions(clip(doc.interiors(), first + 1, hi - 1))
        i = self.furthest(s, inside, wrap=True)
        if i >= 0:
            p = inside.p(i)
            return self.piece(s, p), p, self.resume(p)
        # Last resort, for fence lines longer than the limit: cut anywhere and
        # leave the pieces unfenced rather than fail.
        last = min(hi, len(doc.text))
        anywhere = Positions([(first + 1, last)] if first < last else [])
        i = self.furthest(first, anywhere, wrap=False)
        if i < 0:
            raise ValueError(f"not even one character fits at offset {first}")
        p = anywhere.p(i)
        return self.piece(first, p, wrap=False), p, self.resume(p)

    def resume(self, p: int) -> int:
        return p if self.doc.code_at(p) is not None else self.doc.next_content(p)

    def furthest(self, s: int, cuts: Cuts, wrap: bool) -> int:
        """Index of the furthest cut whose piece fits, or -1."""
        n = len(cuts)
        if n == 0:
            return -1
        probe = max(0, min(cuts.index_before(s + self.guess), n - 1)) if self.guess else 0

        def ok(i: int) -> bool:
            return self.fits(self.piece(s, cuts.p(i), wrap))

        return _gallop(n, probe, ok)


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
    return _Splitter(Doc(text), fits).pieces()


def split_markdown(text: str, fits: Fits) -> list[str]:
    """Split Markdown ``text`` into pieces, each satisfying ``fits``.

    Pieces never start or end with whitespace outside code; whitespace-only
    input gives no piece.  Raises ValueError when not even one character fits.
    """
    return list(iter_split_markdown(text, fits))
