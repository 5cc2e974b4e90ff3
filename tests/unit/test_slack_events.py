"""Which Slack events reach the agent, and as what (adapters/slack_events.py)."""

from __future__ import annotations

from typing import Any

import pytest

from picobridge.adapters.common.textcommands import translate_command
from picobridge.adapters.slack.events import (
    Candidate,
    Identity,
    Skip,
    normalise,
    plain_text,
    slash_command_text,
    strip_mention,
)
from picobridge.contract import ChatRef
from tests.fakes.slack import DEFAULT_CHANNEL, DEFAULT_USER, FakeSlack

ME = Identity("U0BOT", "B0BOT", "T1")


@pytest.fixture
def fake() -> FakeSlack:
    # Only the event builders are used: no server needs to run.
    return FakeSlack()


def run(fake: FakeSlack, event: dict[str, Any], *, allow_bots: bool = False) -> Candidate | Skip:
    return normalise(fake.event_payload(event), ME, allow_bots=allow_bots, command_prefix="!")


def taken(fake: FakeSlack, event: dict[str, Any], **kw: Any) -> Candidate:
    result = run(fake, event, **kw)
    assert isinstance(result, Candidate), result
    return result


def test_dm_is_one_conversation_per_channel(fake: FakeSlack) -> None:
    event = fake.dm_message("hi &amp; bye")
    found = taken(fake, event)
    assert found.chat == ChatRef("slack", event["channel"], None)
    assert found.is_dm and not found.needs_known_thread
    assert found.text == "hi & bye"
    assert found.platform_message_id == f"{event['channel']}:{event['ts']}"
    assert found.user == DEFAULT_USER


def test_dm_thread_is_its_own_conversation(fake: FakeSlack) -> None:
    event = fake.dm_message("in a thread", thread_ts="1700000000.000100")
    assert taken(fake, event).chat == ChatRef("slack", event["channel"], "1700000000.000100")


def test_mention_starts_a_thread_on_the_mention(fake: FakeSlack) -> None:
    message, mention = fake.mention_pair("what now?")
    for event in (message, mention):
        found = taken(fake, event)
        assert found.chat == ChatRef("slack", DEFAULT_CHANNEL, mention["ts"])
        assert found.text == "what now?"
    # The two events of one mention are one message for the bridge.
    assert taken(fake, message).platform_message_id == taken(fake, mention).platform_message_id


def test_mention_inside_a_thread_continues_that_thread(fake: FakeSlack) -> None:
    event = fake.app_mention("join in", thread_ts="1700000000.000200")
    found = taken(fake, event)
    assert found.chat == ChatRef("slack", DEFAULT_CHANNEL, "1700000000.000200")
    assert not found.needs_known_thread


def test_thread_reply_without_mention_needs_a_known_thread(fake: FakeSlack) -> None:
    event = fake.channel_message("more", thread_ts="1700000000.000300")
    found = taken(fake, event)
    assert found.needs_known_thread
    assert found.chat.thread_id == "1700000000.000300"


def test_top_level_channel_message_without_mention_is_skipped(fake: FakeSlack) -> None:
    assert run(fake, fake.channel_message("chatter")) == Skip("channel message without mention")


def test_own_and_other_bots(fake: FakeSlack) -> None:
    own = fake.bot_message("mine", own=True)
    other = fake.bot_message("theirs")
    assert run(fake, own) == Skip("own message")
    assert run(fake, own, allow_bots=True) == Skip("own message")
    assert run(fake, other) == Skip("bot message")
    # Another bot mentioning us in a channel, when bots are allowed.
    other_mention = fake.bot_message(f"<@{ME.user_id}> ping")
    found = taken(fake, other_mention, allow_bots=True)
    assert found.user == "B0OTHER" and found.text == "ping"


def test_edits_and_deletions_are_skipped_but_a_late_file_share_is_taken(
        fake: FakeSlack) -> None:
    original = fake.dm_message("typo")
    assert run(fake, fake.message_changed(original, "fixed")) == Skip("message_changed")
    assert isinstance(run(fake, fake.message_deleted(original)), Skip)
    changed = fake.message_changed(original, "with file")
    changed["message"].update(subtype="file_share", files=[{"id": "F1", "name": "a.txt"}])
    found = taken(fake, changed)
    assert found.ts == original["ts"]  # dedupes with the original file_share event
    assert found.files == ({"id": "F1", "name": "a.txt"},)


def test_other_subtypes_and_event_types_are_skipped(fake: FakeSlack) -> None:
    join = {**fake.channel_message("joined"), "subtype": "channel_join"}
    assert run(fake, join) == Skip("subtype 'channel_join'")
    reaction = {"type": "reaction_added", "user": DEFAULT_USER, "reaction": "eyes"}
    assert run(fake, reaction) == Skip("event type 'reaction_added'")
    assert normalise({"type": "url_verification"}, ME, allow_bots=False,
                     command_prefix="!") == Skip("payload type 'url_verification'")


def test_file_share_keeps_files(fake: FakeSlack) -> None:
    file = {"id": "F9", "name": "x.bin", "url_private_download": "https://files.slack.com/x"}
    event = fake.file_share_message([file], "")
    found = taken(fake, event)
    assert found.files == (file,) and found.text == ""


@pytest.mark.parametrize(("text", "expected"), [
    ("!new", "/new"),
    ("!NEW please", "/new please"),
    ("!status", "/status"),
    ("!newer", "!newer"),
    ("! new", "! new"),
    ("!frobnicate", "!frobnicate"),
    ("say !new", "say !new"),
])
def test_text_commands(text: str, expected: str) -> None:
    assert translate_command(text, "!") == expected


def test_mention_then_command(fake: FakeSlack) -> None:
    found = taken(fake, fake.app_mention("!new", thread_ts="1700000000.000400"))
    assert found.text == "/new"


@pytest.mark.parametrize(("text", "expected"), [
    ("new", "/new"), ("  Status ", "/status"), ("", "/help"), ("stop now", "/stop now"),
    ("!help", "/help"), ("dance", None), ("agent  coder", "/agent coder"),
])
def test_slash_command_text(text: str, expected: str | None) -> None:
    assert slash_command_text(text) == expected


def test_plain_text_of_slack_markup() -> None:
    raw = ("see <https://example.com|the site> and <https://x.org>, ask <@U123|ann> in "
           "<#C42|general> <!here> &lt;tag&gt; a &amp; b <mailto:a@b.c|a@b.c>")
    assert plain_text(raw) == ("see the site (https://example.com) and https://x.org, ask @ann "
                               "in #general @here <tag> a & b a@b.c")


def test_strip_mention_only_removes_the_bot() -> None:
    assert strip_mention("<@U0BOT> hi <@U0BOT|bot>  there <@U9>", "U0BOT") == "hi there <@U9>"
