"""Questions as Block Kit and their clicks on Slack (adapters/slack/buttons.py, clicks.py,
shapes.py): the blocks, which conversation a click belongs to, payloads that cannot be read,
a click while the store cannot answer, and questions closed other than by a click."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.buttons import EXPIRED_LINE, Asked, QuestionMessages
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.slack import clicks as clicks_module
from picobridge.adapters.slack.buttons import Posted, answered_blocks, clicked, question_blocks
from picobridge.adapters.slack.clicks import NOT_TAKEN, SlackClicks
from picobridge.adapters.slack.send import SlackSender
from picobridge.adapters.slack.shapes import envelope_problem, interaction_problem
from picobridge.contract import (
    ChatRef,
    Dialog,
    DialogAnswer,
    DialogClosed,
    DialogEnd,
    DialogKind,
    OutgoingReply,
    ReplyKind,
    StorageUnavailable,
)
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.fakes.slack.blocks import check_blocks

CONFIRM = Dialog("ab12cd341", DialogKind.CONFIRM, "Deploy now?")
QUESTION = "❓ **Deploy now?**\n\n_Reply yes or no (or cancel)._"
PRIVATE = "the user's secret words"


def test_a_confirm_is_its_text_and_one_row_of_buttons() -> None:
    blocks = question_blocks(QUESTION, CONFIRM, Asked())
    assert blocks is not None
    section, actions = blocks
    assert section == {"type": "section", "text": {
        "type": "mrkdwn", "text": "❓ *Deploy now?*\n\n_Reply yes or no (or cancel)._"}}
    assert [(e["text"]["text"], e["action_id"], e.get("style")) for e in actions["elements"]] \
        == [("Yes", "d:ab12cd341:y", "primary"), ("No", "d:ab12cd341:n", None),
            ("Cancel", "d:ab12cd341:c", None)]
    assert all(e["value"] == e["action_id"] for e in actions["elements"])
    check_blocks(blocks)  # what Slack takes


def test_long_texts_and_options_stay_within_slacks_limits() -> None:
    asked = Asked()
    options = tuple(f"option {n} " + "x" * 100 for n in range(20))
    select = Dialog("ab12cd342", DialogKind.SELECT, "Pick", options=options)
    text = "\n\n".join(f"paragraph {n} " + "y" * 900 for n in range(4))
    blocks = question_blocks(text, select, asked)
    assert blocks is not None
    assert [b["type"] for b in blocks] == ["section", "section", "actions"]
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks[:-1])
    assert all(len(e["text"]["text"]) <= 75 for e in blocks[-1]["elements"])
    check_blocks(blocks)
    assert asked.answer("ab12cd342", "19") == DialogAnswer(value=options[19])
    # Too long for 50 blocks: sent as text, answered by typing.
    huge = "\n\n".join("z" * 2900 for _ in range(60))
    assert question_blocks(huge, Dialog("ab12cd343", DialogKind.CONFIRM, "?"), asked) is None
    assert asked.answer("ab12cd343", "y") is None  # never shown with buttons
    assert question_blocks(QUESTION, Dialog("ab12cd344", DialogKind.INPUT, "?"), asked) is None


def test_an_answered_question_keeps_its_text_and_loses_its_buttons() -> None:
    shown = check_blocks(question_blocks(QUESTION, CONFIRM, Asked()))
    after = answered_blocks(shown, "*bold* <!here>")
    assert [b["type"] for b in after] == ["section", "section"]
    assert after[0] == shown[0]
    # The answer is shown as typed, never as mrkdwn (no mentions, no formatting).
    assert after[1]["text"] == {"type": "plain_text", "text": "✓ Answer: *bold* <!here>"}
    check_blocks(after)
    assert answered_blocks(None, "yes") == [
        {"type": "section", "text": {"type": "plain_text", "text": "✓ Answer: yes"}}]


def payload(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "block_actions", "user": {"id": "U1", "team_id": "T1"},
        "channel": {"id": "D1"}, "container": {"channel_id": "D1", "message_ts": "10.0"},
        "message": {"ts": "10.0", "text": PRIVATE, "blocks": []},
        "actions": [{"action_id": "d:ab12cd341:y", "block_id": "q", "type": "button"}]}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize(("message", "thread"), [
    ({"ts": "10.0"}, None),  # the top of a DM
    ({"ts": "10.0", "thread_ts": "10.0"}, None),  # ... with a thread started under it since
    ({"ts": "12.0", "thread_ts": "10.0"}, "10.0"),  # in a thread: that conversation
])
def test_a_click_belongs_to_the_conversation_of_its_message(
        message: dict[str, Any], thread: str | None) -> None:
    found = clicked(payload(message=message))
    assert found is not None and found.chat == ChatRef("slack", "D1", thread)
    assert (found.user, found.data, found.ts) == ("U1", "d:ab12cd341:y", message["ts"])


def test_clicks_that_name_no_conversation_are_not_read() -> None:
    assert clicked(payload(channel=None, container={})) is None
    assert clicked(payload(message=None, container={"channel_id": "D1"})) is None
    assert clicked(payload(user=None)) is None
    # Without the message, its place comes from the container.
    found = clicked(payload(channel=None, message=None,
                            container={"channel_id": "C1", "message_ts": "3.0",
                                       "thread_ts": "1.0"}))
    assert found is not None and found.chat == ChatRef("slack", "C1", "1.0")


@pytest.mark.parametrize("body", [
    PRIVATE, 7, {"type": 5}, payload(actions=[]), payload(actions=PRIVATE),
    payload(actions=[PRIVATE]), payload(actions=[{"action_id": 7391}]),
    payload(user={"id": 7391}), payload(user=PRIVATE), payload(channel={"id": ["D1"]}),
    payload(message={"ts": 10.0}), payload(message={"ts": "1", "blocks": PRIVATE}),
    payload(container={"message_ts": 7391}),
])
def test_unreadable_interactions_are_named_without_their_content(body: object) -> None:
    problem = interaction_problem(body)
    assert problem is not None and PRIVATE not in problem and "7391" not in problem
    assert envelope_problem({"type": "interactive", "payload": body}) == problem


def test_readable_interactions_and_other_kinds_pass() -> None:
    assert interaction_problem(payload()) is None
    # Kinds the adapter does not take are bolt's to turn away (no listener).
    assert interaction_problem({"type": "view_submission", "view": PRIVATE}) is None


@dataclass
class Bridge:
    """What a click uses of BridgeLink, with a store that refuses `outages` times."""

    outages: int = 0
    answered: list[DialogAnswer] = field(default_factory=list)

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        if self.outages:
            self.outages -= 1
            raise StorageUnavailable("database is locked")
        return True

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        self.answered.append(answer)
        return answer.describe()

    async def get_cursor(self, name: str) -> str | None:
        return None

    async def set_cursor(self, name: str, value: str) -> None:
        return None


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


async def ask_and_click(fake: FakeSlack, bridge: Bridge, patience: float,
                        monkeypatch: pytest.MonkeyPatch) -> tuple[TaskSet, str]:
    """Post the question as the adapter does, click No; returns the clicks' tasks and the
    question's DM."""
    monkeypatch.setattr(clicks_module, "STORAGE_PATIENCE", patience)
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url, retry_handlers=[])
    asked = Asked()
    dm = fake.dm_channel(DEFAULT_USER)
    sender = SlackSender(client, bridge, max_chunks=4, on_auth_failure=lambda _: None,
                         asked=asked)
    await sender.send(ChatRef("slack", dm), OutgoingReply(QUESTION, ReplyKind.QUESTION,
                                                          dialog=CONFIRM))
    tasks = TaskSet(logging.getLogger("test"))
    clicks = SlackClicks(bridge, client, asked, ChatSerial(tasks), tasks)  # type: ignore[arg-type]
    (question,) = fake.posted_messages(dm)
    clicks.take(fake.block_actions_payload(question, text="No"))
    return tasks, dm


async def test_a_click_waits_out_a_short_storage_outage(
        fake: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    bridge = Bridge(outages=1)
    tasks, dm = await ask_and_click(fake, bridge, 30.0, monkeypatch)
    await tasks.wait(10.0)
    assert bridge.answered == [DialogAnswer(confirmed=False)]
    (question,) = fake.posted_messages(dm)
    assert question.text.endswith("✓ Answer: no") and question.blocks is not None
    assert [b["type"] for b in question.blocks] == ["section", "section"]
    await tasks.close()


async def test_a_click_the_store_never_takes_is_told_to_the_person(
        fake: FakeSlack, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    bridge = Bridge(outages=1000)
    with caplog.at_level(logging.WARNING, logger="picobridge.slack"):
        tasks, dm = await ask_and_click(fake, bridge, 0.1, monkeypatch)
        await tasks.wait(10.0)
    assert bridge.answered == []
    assert [(e.user, e.text) for e in fake.ephemeral_messages] == [(DEFAULT_USER, NOT_TAKEN)]
    (question,) = fake.posted_messages(dm)
    assert question.edits == []  # still open: an answer typed or clicked later counts
    assert "was not taken" in caplog.text
    await tasks.close()


async def posted_question(fake: FakeSlack, text: str = QUESTION) -> tuple[
        SlackClicks, TaskSet, list[tuple[str, Posted]], str]:
    """Post a question as the adapter does, its sender telling its clicks where it went;
    returns the clicks, their tasks, what the sender reported and the DM."""
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url, retry_handlers=[])
    tasks = TaskSet(logging.getLogger("test"))
    asked, bridge = Asked(), Bridge()
    clicks = SlackClicks(bridge, client, asked, ChatSerial(tasks), tasks,  # type: ignore[arg-type]
                         QuestionMessages())
    reported: list[tuple[str, Posted]] = []

    def sent(dialog_id: str, posted: Posted) -> None:
        reported.append((dialog_id, posted))
        clicks.sent(dialog_id, posted)

    sender = SlackSender(client, bridge, max_chunks=4, on_auth_failure=lambda _: None,
                         asked=asked, on_question=sent)
    dm = fake.dm_channel(DEFAULT_USER)
    await sender.send(ChatRef("slack", dm), OutgoingReply(text, ReplyKind.QUESTION,
                                                          dialog=CONFIRM))
    return clicks, tasks, reported, dm


async def test_the_sender_reports_the_message_that_carries_the_buttons(fake: FakeSlack) -> None:
    _, tasks, reported, dm = await posted_question(fake)
    (question,) = fake.posted_messages(dm)
    ((dialog_id, posted),) = reported
    assert (dialog_id, posted.channel, posted.ts, posted.text) == (
        CONFIRM.id, dm, question.ts, question.text)
    # The blocks as sent (Slack's copy has its own block ids): what a change starts from.
    assert posted.blocks == question_blocks(QUESTION, CONFIRM, Asked())
    await tasks.close()


async def test_a_question_closed_otherwise_shows_how_and_loses_its_buttons(
        fake: FakeSlack) -> None:
    clicks, tasks, _, dm = await posted_question(fake)
    (question,) = fake.posted_messages(dm)
    original, section = question.text, (question.blocks or [])[0]["text"]
    await clicks.closed(DialogClosed(CONFIRM.id, DialogEnd.EXPIRED))
    assert question.text == f"{original}\n\n{EXPIRED_LINE}"
    assert [(b["type"], b["text"]) for b in question.blocks or ()] == [
        ("section", section),
        ("section", {"type": "plain_text", "text": EXPIRED_LINE, "emoji": True})]
    await clicks.closed(DialogClosed(CONFIRM.id, DialogEnd.CLOSED))  # nothing left to change
    assert len(question.edits) == 1
    await tasks.close()


async def test_a_question_closed_before_it_was_posted_is_changed_once_it_is(
        fake: FakeSlack) -> None:
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url, retry_handlers=[])
    tasks = TaskSet(logging.getLogger("test"))
    shown: QuestionMessages[Posted] = QuestionMessages()
    clicks = SlackClicks(Bridge(), client, Asked(), ChatSerial(tasks), tasks, shown)  # type: ignore[arg-type]
    await clicks.closed(DialogClosed(CONFIRM.id, DialogEnd.ANSWERED, DialogAnswer(value="B")))
    assert fake.calls_to("chat.update") == []
    blocks = question_blocks(QUESTION, CONFIRM, Asked())
    dm = fake.dm_channel(DEFAULT_USER)
    response = await client.chat_postMessage(channel=dm, text="Deploy?", blocks=blocks)
    clicks.sent(CONFIRM.id, Posted(dm, str(response["ts"]), "Deploy?", blocks))
    await tasks.wait(10.0)
    (question,) = fake.posted_messages(dm)
    assert question.text == "Deploy?\n\n✓ Answer: B"
    assert [b["type"] for b in question.blocks or ()] == ["section", "section"]
    await tasks.close()


async def test_a_closed_question_slack_will_not_change_is_only_logged(
        fake: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    clicks, tasks, _, dm = await posted_question(fake, f"{QUESTION} {PRIVATE}")
    fake.fail_next("chat.update", 200, error="message_not_found")
    with caplog.at_level(logging.INFO, logger="picobridge.slack"):
        await clicks.closed(DialogClosed(CONFIRM.id, DialogEnd.EXPIRED))
    assert "keeps its buttons (message_not_found)" in caplog.text
    assert PRIVATE not in caplog.text
    (question,) = fake.posted_messages(dm)
    assert question.edits == [] and "actions" in [b["type"] for b in question.blocks or ()]
    await tasks.close()
