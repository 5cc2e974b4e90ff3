"""Tests for adapters.render_slack: mrkdwn conversion, escaping, splitting, fallback."""

from __future__ import annotations

import html
import re
from collections import Counter
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from picobridge.adapters.slack import render as rs
from picobridge.adapters.slack.render import escape, render_slack, to_mrkdwn
from tests.unit.test_render_telegram import long_reply
from tests.unit.test_textsplit import markdownish

# What may legitimately hold raw < and >: links we wrote, and quote markers.
_SLACK_LINK = re.compile(r"<[^\s<>|]+(?:\|[^<>]*)?>")
_QUOTE = re.compile(r"^(?:[ \t]*>)+", re.MULTILINE)
_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")
_FENCE_INFO = re.compile(r"^[ \t]*(?:`{3,}|~{3,})(.*)$", re.MULTILINE)


def assert_valid(chunks: list[str], limit: int) -> None:
    for chunk in chunks:
        assert chunk.strip()
        assert len(chunk) <= limit
        assert not _ENTITY.search(chunk), chunk
        bare = _QUOTE.sub("", _SLACK_LINK.sub("", chunk))
        assert "<" not in bare and ">" not in bare, chunk
        assert chunk.count("```") % 2 == 0, chunk


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** *it* ~~gone~~ ***both***", "*bold* _it_ ~gone~ *_both_*"),
        ("# Title **x**\n## Sub ##", "*Title x*\n*Sub*"),
        (
            "- a\n  - b\n    - c\n1. one\n- [ ] todo\n- [x] done",
            "• a\n  • b\n    • c\n1. one\n• ☐ todo\n• ☑ done",
        ),
        ("| a | b |\n|---|---|\n| 1 | **2** |", "*a* | *b*\n1 | *2*"),
        ("> quoted **b**\n> 5 > 3", "> quoted *b*\n> 5 &gt; 3"),
        ("[docs](https://x.io/a?b=1&c=2)", "<https://x.io/a?b=1&amp;c=2|docs>"),
        (
            "[wiki](https://en.wikipedia.org/wiki/A_(b))",
            "<https://en.wikipedia.org/wiki/A_(b)|wiki>",
        ),
        ('[**bold** link](http://x.io "title")', "<http://x.io|*bold* link>"),
        ("![chart](http://x.io/c.png)", "<http://x.io/c.png|chart>"),
        ("<https://x.io/?a&b> <me@x.io>", "<https://x.io/?a&amp;b> <mailto:me@x.io|me@x.io>"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a & b, 5 > 3, &amp;", "a &amp; b, 5 &gt; 3, &amp;amp;"),
        ("`**x** <y> [a](b)`", "`**x** &lt;y&gt; [a](b)`"),
        ("see http://x.io/a__b__c. and snake_case", "see http://x.io/a__b__c. and snake_case"),
        ("[not a link](has space)", "[not a link](has space)"),
        ("**unclosed", "**unclosed"),
        ("line\u2028sep", "line\u2028sep"),
    ],
)
def test_conversion(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_code_block_is_kept_verbatim_but_escaped() -> None:
    text = (
        "Intro **b**\n\n```python\nif a < b and c:\n    print('**x**')  # - not a list\n```\nafter"
    )
    assert to_mrkdwn(text) == (
        "Intro *b*\n```\nif a &lt; b and c:\n    print('**x**')  # - not a list\n```\nafter"
    )


def test_unusual_fences_are_code_too() -> None:
    assert to_mrkdwn("~~~c++\n# include\n```\n~~~") == "```\n# include\n`\u200b``\n```"
    assert to_mrkdwn("- item\n  ```\n  # x\n  ```\n- **next**") == "• item\n```\n# x\n```\n• *next*"
    assert to_mrkdwn("```\nunclosed <x>") == "```\nunclosed &lt;x&gt;\n```"


def test_blank_input_gives_no_chunk() -> None:
    assert render_slack(" \n ") == []


def test_ten_thousand_characters_split_with_code_blocks_intact() -> None:
    text, codes = long_reply()
    chunks = render_slack(text)
    assert len(chunks) >= 3
    assert_valid(chunks, 3900)
    for code in codes:
        shown = escape(code).replace("```", "`\u200b``")
        assert sum(shown in chunk for chunk in chunks) == 1
    assert "**" not in "".join(chunks).replace("x ** ", "")


def test_oversized_code_block_is_split_into_fenced_chunks() -> None:
    code = "\n".join(f"x_{i} = a < b" for i in range(400))
    chunks = render_slack(f"```python\n{code}\n```", limit=1000)
    assert len(chunks) > 1
    assert_valid(chunks, 1000)
    inner = [line for c in chunks for line in c.split("\n") if line != "```"]
    assert "\n".join(inner) == escape(code)


def test_converter_failure_falls_back_to_escaped_text(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def convert(self, markdown: str) -> str:
            raise RuntimeError("boom")

    monkeypatch.setattr(rs, "SlackMarkdownConverter", Broken)
    assert render_slack("a **b** <c>", limit=100) == ["a **b** &lt;c&gt;"]


def test_small_limit_is_rejected() -> None:
    with pytest.raises(ValueError):
        render_slack("x", limit=9)


@settings(max_examples=300, deadline=None)
@given(text=st.text(), limit=st.integers(10, 300))
def test_property_never_raises_on_any_text(text: str, limit: int) -> None:
    assert_valid(render_slack(text, limit), limit)


links = st.sampled_from(["[a](http://x.io/(p))", "<http://y.io?a&b>", "![i](u)", "http://z.io/a_b"])


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.one_of(markdownish, links), max_size=6).map(" ".join),
    limit=st.integers(40, 300),
)
def test_property_markdown_chunks_are_valid(text: str, limit: int) -> None:
    assert_valid(render_slack(text, limit), limit)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from([*"ab *_`#-~\n<&>|[]()!", "**", "```", "\n\n"]), max_size=60).map(
        "".join
    )
)
@example(text="[](a)")  # a link with no label: Slack shows its address
@example(text="[](a<)")  # a "<" in an address arrives percent-encoded (%3C)
def test_property_words_and_specials_survive(text: str) -> None:
    def counts(s: str) -> Counter[str]:
        return Counter(ch for ch in s if ch in "ab<&")

    rendered = "".join(render_slack(text, 60))
    # Slack's link markup (<url> or <url|label>) is the rendering of a Markdown link, not
    # content; a literal < or > in the text arrives escaped (&lt; &gt;), and in an address
    # percent-encoded (the alphabet has no "%" of its own to be mistaken for one).
    rendered = re.sub(r"<([^<>|]*)(?:\|([^<>]*))?>",
                      lambda m: unquote(m.group(1)) + (m.group(2) or ""), rendered)
    shown = counts(html.unescape(rendered))
    # Only a code fence's info string (its language) may go missing.
    infos = "".join(m.group(1) for m in _FENCE_INFO.finditer(text))
    assert not (counts(text) - counts(infos)) - shown
    assert not shown - counts(text)
