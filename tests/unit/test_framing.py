from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from picobridge.agent.framing import (
    LineSplitter,
    OversizedLine,
    decode_record,
    encode_record,
    read_lines,
)

# Text that would trip a Unicode-aware line splitter.
tricky = st.text(alphabet=st.sampled_from(["a", "\u2028", "\u2029", "\r", "\x85", "\x0b",
                                           "\x0c", "😀", "\n", "\x1c", "é"]), max_size=40)


def split_all(data: bytes, cuts: list[int], max_line: int = 1 << 20) -> list[bytes]:
    splitter = LineSplitter(max_line)
    lines: list[bytes] = []
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        lines += splitter.feed(data[start:cut])
        start = cut
    lines += splitter.feed(data[start:])
    return lines


@given(st.lists(tricky, max_size=8), st.lists(st.integers(0, 10_000), max_size=6))
def test_records_survive_any_chunking(contents: list[str], cuts: list[int]) -> None:
    records = [{"type": "response", "content": c} for c in contents]
    # The agent side writes raw (not \\u-escaped) Unicode, as the fake and real agents may.
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)
    decoded = [decode_record(line) for line in split_all(data, cuts)]
    assert decoded == records


def test_one_trailing_cr_is_stripped_only() -> None:
    assert split_all(b'{"a":1}\r\n{"b":2}\r\r\n', []) == [b'{"a":1}', b'{"b":2}\r']


def test_over_long_line_is_skipped_and_the_next_survives() -> None:
    splitter = LineSplitter(max_line=10)
    out = splitter.feed(b"x" * 8)
    out += splitter.feed(b"y" * 8)  # now over the limit, without a newline yet
    out += splitter.feed(b"zzz\nok\n")
    # The skipped line is reported in its place by its first bytes, then the next one.
    assert out == [b"x" * 8, b"ok"]
    assert isinstance(out[0], OversizedLine) and not isinstance(out[1], OversizedLine)
    assert splitter.oversized == 1


def test_over_long_line_in_one_chunk_is_skipped() -> None:
    splitter = LineSplitter(max_line=4)
    out = splitter.feed(b"ab\n123456\n12\n")
    assert out == [b"ab", b"123456", b"12"]
    assert [isinstance(line, OversizedLine) for line in out] == [False, True, False]


def test_line_at_the_limit_is_kept() -> None:
    splitter = LineSplitter(max_line=4)
    assert splitter.feed(b"12") == []
    assert splitter.feed(b"34\n") == [b"1234"]


def test_junk_is_none_not_an_error() -> None:
    for junk in (b"", b"   ", b"plain", b'{"type": "resp', b"\xff\xfe", b"[1,2]", b"42"):
        assert decode_record(junk) is None


def test_encode_is_one_ascii_line() -> None:
    line = encode_record({"content": "a\u2028b\nc😀"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.isascii()
    assert json.loads(line) == {"content": "a\u2028b\nc😀"}


class _Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def read(self, n: int = -1) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


async def test_read_lines_yields_an_unterminated_last_line() -> None:
    lines = [line async for line in read_lines(_Chunks([b'{"a":1}\n{"b"', b":2}"]))]
    assert lines == [b'{"a":1}', b'{"b":2}']
