"""adapters/common/drafts.py DraftText: a turn's streamed text, appended without copying,
joined when shown, and kept only as far as a draft can show it."""

from __future__ import annotations

from picobridge.adapters.common.drafts import DraftText


def test_deltas_join_into_the_text_in_order() -> None:
    text = DraftText(cap=100)
    for delta in ("Hel", "lo", ", ", "world"):
        text.add(delta)
    assert text.text() == "Hello, world"
    assert len(text) == 12
    assert not text.cut
    text.add("!")
    assert text.text() == "Hello, world!"  # a delta after a join is not lost


def test_text_past_the_cap_is_dropped_and_marked() -> None:
    text = DraftText(cap=10)
    text.add("0123456")
    text.add("789abc")
    assert text.text() == "0123456789"
    assert text.cut
    version = text.version
    text.add("more")
    assert text.version == version  # nothing a draft could show changed
    assert text.text() == "0123456789"


def test_version_moves_with_every_kept_delta_only() -> None:
    text = DraftText(cap=5)
    assert text.version == 0
    text.add("")
    assert text.version == 0 and not text.cut
    text.add("ab")
    text.add("c")
    assert text.version == 2
    text.add("def")
    assert text.version == 3 and text.cut and text.text() == "abcde"


def test_many_one_character_deltas_keep_every_character() -> None:
    # More deltas than the parts kept before an intermediate join.
    text = DraftText(cap=20_000)
    expected = "".join(chr(ord("a") + i % 26) for i in range(15_000))
    for char in expected:
        text.add(char)
    assert text.text() == expected
    assert not text.cut
