"""The agent's questions on Slack, end to end: `picobridge run` with a prime-rpc agent that asks
(tests/e2e/dialog_agent.py), FakeSlack as Slack. Confirm and select questions come with Block
Kit buttons; a click (Socket Mode `interactive` envelope, or a signed form POST in HTTP mode)
reaches the agent as its extension_ui_response, then the question shows the answer without
buttons; clicks that must not count (a stranger's, a second one, one naming another
conversation's question) change nothing and the person is told why in an ephemeral message;
input questions are answered by the next message.

One Socket Mode daemon serves most of the module; every test talks in its own conversation.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.slack_support import (
    SIGNING_SECRET,
    assert_no_secrets,
    http_port,
    reply_to,
    slack_config,
)
from tests.fakes.slack import FakeSlack, PostedMessage
from tests.harness import Daemon

# One worker runs the whole module (xdist would start the module's daemon again in each).
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("test_slack_buttons")]

AGENT = Path(__file__).with_name("dialog_agent.py")
ALICE, BOB, CAROL, DAVE, ERIN, FRANK = ("U0ALICE", "U0BOB", "U0CAROL", "U0DAVE", "U0ERIN",
                                        "U0FRANK")
STRANGER = "U0STRANGER"
CHANNEL = "C0BUTTONS"
CLOSED = "This question is closed."
NOT_ALLOWED = "Sorry, only people allowed to talk to the agent can answer its questions."
AGENT_SETTINGS = {"protocol": "prime-rpc", "command": [sys.executable, str(AGENT)],
                  "pool_size": 4, "ping_interval": 2, "ping_timeout": 5}


@dataclass
class Env:
    fake: FakeSlack
    daemon: Daemon


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp = tmp_path_factory.mktemp("slack-buttons")
    async with FakeSlack() as fake:
        config = slack_config(tmp, fake, agent=AGENT_SETTINGS,
                              allowed_users=[ALICE, BOB, CAROL, DAVE, ERIN, FRANK])
        daemon = Daemon(config)
        async with daemon:
            await fake.wait_for_socket()
            yield Env(fake, daemon)
        assert_no_secrets(daemon, fake)
        assert "Traceback" not in daemon.log


def got(answer: dict[str, Any]) -> str:
    """The agent's reply once it got `answer` (dialog_agent.py)."""
    return "got: " + json.dumps(answer, sort_keys=True)


def button_labels(message: PostedMessage) -> list[str]:
    return [e["text"]["text"] for b in message.blocks or () if b["type"] == "actions"
            for e in b["elements"]]


def types(message: PostedMessage) -> list[str]:
    return [b["type"] for b in message.blocks or ()]


async def shows_answer(fake: FakeSlack, message: PostedMessage, shown: str) -> None:
    line = f"✓ Answer: {shown}"
    await fake.wait_for(lambda: message.text.endswith(line) and "actions" not in types(message),
                        f"the question showing {shown!r}")
    assert message.blocks is not None
    assert message.blocks[-1]["text"] == {"type": "plain_text", "text": line, "emoji": True}


async def told(fake: FakeSlack, user: str, text: str) -> None:
    await fake.wait_for(lambda: any(e.user == user and e.text == text
                                    for e in fake.ephemeral_messages),
                        f"{user} told {text!r}")


async def test_a_confirm_answered_with_a_button_reaches_the_agent(env: Env) -> None:
    fake = env.fake
    event = fake.dm_message("please confirm the deploy", user=ALICE)
    await fake.send_event(event)
    question = await reply_to(fake, event["channel"], "Deploy now?")
    assert types(question) == ["section", "actions"]
    assert button_labels(question) == ["Yes", "No", "Cancel"]
    elements = question.blocks[1]["elements"] if question.blocks else []
    assert all(e["action_id"] == e["value"] and e["action_id"].startswith("d:")
               for e in elements)
    # The notification text is the whole question, which says how to answer by typing.
    assert "Reply yes or no" in question.text
    assert question.blocks is not None and "*Deploy now?*" in question.blocks[0]["text"]["text"]
    original = question.text

    envelope = await fake.click(question, "Yes", user=ALICE)
    await fake.wait_for_ack(envelope["envelope_id"])
    await reply_to(fake, event["channel"], got({"confirmed": True}))
    await shows_answer(fake, question, "yes")
    assert question.text == f"{original}\n\n✓ Answer: yes"
    assert [b["type"] for b in question.blocks or ()] == ["section", "section"]
    assert envelope["envelope_id"] not in fake.ack_timeouts


async def test_a_strangers_click_does_nothing_and_they_are_told(env: Env) -> None:
    fake = env.fake
    fake.register_channel(CHANNEL, name="buttons")
    mention, _ = await fake.send_mention("confirm this", channel=CHANNEL, user=BOB)
    thread = mention["payload"]["event"]["ts"]
    question = await reply_to(fake, CHANNEL, "Deploy now?", thread_ts=thread)

    await fake.click(question, "Yes", user=STRANGER)
    await told(fake, STRANGER, NOT_ALLOWED)
    assert "actions" in types(question)  # still open for the people allowed

    # Someone allowed answers: the agent hears only that answer, not the stranger's yes.
    await fake.click(question, "No", user=CAROL)
    await reply_to(fake, CHANNEL, got({"confirmed": False}), thread_ts=thread)
    await shows_answer(fake, question, "no")
    assert not [m for m in fake.posted_messages(CHANNEL) if "true" in m.text]


async def test_a_second_click_on_an_answered_question_does_nothing(env: Env) -> None:
    fake = env.fake
    event = fake.dm_message("confirm twice", user=DAVE)
    await fake.send_event(event)
    question = await reply_to(fake, event["channel"], "Deploy now?")
    # Both clicks made before the bot saw the first (a double click).
    first = fake.block_actions_payload(question, user=DAVE, text="No")
    second = fake.block_actions_payload(question, user=DAVE, text="Yes")
    await fake.send_interaction(first)
    await fake.send_interaction(second)
    await shows_answer(fake, question, "no")
    await told(fake, DAVE, CLOSED)
    # The agent got one answer: whatever it said to a second one would come before this.
    await fake.send_event(fake.dm_message("afterwards", user=DAVE))
    await reply_to(fake, event["channel"], "you said: afterwards")
    assert [m.text for m in fake.posted_messages(event["channel"])
            if m.text.startswith("got:")] == [got({"confirmed": False})]


async def test_a_click_in_another_conversation_does_nothing(env: Env) -> None:
    fake = env.fake
    asked = fake.dm_message("confirm it", user=ERIN)
    await fake.send_event(asked)
    question = await reply_to(fake, asked["channel"], "Deploy now?")
    other = fake.dm_message("hello", user=FRANK)
    await fake.send_event(other)
    elsewhere = await reply_to(fake, other["channel"], "you said: hello")
    # A click naming ERIN's question from FRANK's DM: Slack only sends the buttons of the
    # message clicked, so only a forged payload could carry it.
    forged = fake.block_actions_payload(question, user=FRANK, text="Yes")
    stored = fake.message(elsewhere.channel, elsewhere.ts)
    forged.update(channel={"id": elsewhere.channel, "name": "directmessage"}, message=stored)
    forged["container"].update(channel_id=elsewhere.channel, message_ts=elsewhere.ts)
    await fake.send_interaction(forged)
    await told(fake, FRANK, CLOSED)
    assert "actions" in types(question) and elsewhere.edits == []

    await fake.click(question, "Cancel", user=ERIN)
    await reply_to(fake, asked["channel"], got({"cancelled": True}))
    await shows_answer(fake, question, "cancelled")


async def test_a_select_shows_one_button_per_option(env: Env) -> None:
    fake = env.fake
    event = fake.dm_message("select a colour", user=ALICE)
    await fake.send_event(event)
    question = await reply_to(fake, event["channel"], "Which colour?")
    assert button_labels(question) == ["red", "green", "blue", "Cancel"]
    await fake.click(question, "green", user=ALICE)
    await reply_to(fake, event["channel"], got({"value": "green"}))
    await shows_answer(fake, question, "green")
    with pytest.raises(LookupError):  # the buttons are gone: nobody can click them
        fake.block_actions_payload(question, user=ALICE, text="red")


async def test_a_question_with_a_thread_under_it_is_answered_in_its_dm(env: Env) -> None:
    fake = env.fake
    event = fake.dm_message("select in the DM", user=CAROL)
    await fake.send_event(event)
    question = await reply_to(fake, event["channel"], "Which colour?")
    # Someone starts a thread under the question: a conversation of its own, and the
    # question's message now carries its own ts as thread_ts.
    aside = fake.dm_message("an aside", user=CAROL, thread_ts=question.ts)
    await fake.send_event(aside)
    await reply_to(fake, event["channel"], "you said: an aside", thread_ts=question.ts)
    await fake.click(question, "blue", user=CAROL)
    await reply_to(fake, event["channel"], got({"value": "blue"}))
    await shows_answer(fake, question, "blue")


async def test_typed_answers_still_work(env: Env) -> None:
    fake = env.fake
    event = fake.dm_message("input your name", user=BOB)
    await fake.send_event(event)
    question = await reply_to(fake, event["channel"], "Your name?")
    assert question.blocks is None  # input is answered by the next message
    await fake.send_event(fake.dm_message("Ada Lovelace", user=BOB))
    await reply_to(fake, event["channel"], "✓ Answer sent: Ada Lovelace")
    await reply_to(fake, event["channel"], got({"value": "Ada Lovelace"}))


async def test_unreadable_clicks_are_acknowledged_and_skipped(env: Env) -> None:
    fake = env.fake
    bad = [await fake.send_interaction("not an object"),
           await fake.send_interaction({"type": "block_actions", "actions": [],
                                        "user": {"id": CAROL}}),
           await fake.send_interaction({"type": "block_actions", "user": {"id": 5},
                                        "actions": [{"action_id": "d:x:y"}]})]
    for envelope in bad:
        await fake.wait_for_ack(envelope["envelope_id"])
    event = fake.dm_message("still here", user=CAROL)
    await fake.send_event(event)
    await reply_to(fake, event["channel"], "you said: still here")
    assert env.daemon.log.count("a Slack Socket Mode envelope was skipped") >= 3
    assert "d:x:y" not in env.daemon.log


async def test_a_click_in_http_mode(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake, mode="http", agent=AGENT_SETTINGS,
                              allowed_users=[ALICE])
        async with Daemon(config) as daemon:
            url = f"http://127.0.0.1:{await http_port(daemon)}/slack/events"
            event = fake.dm_message("please confirm", user=ALICE)
            assert (await fake.post_event_http(url, event, SIGNING_SECRET)).status == 200
            question = await reply_to(fake, event["channel"], "Deploy now?")
            payload = fake.block_actions_payload(question, user=ALICE, text="Yes")

            # Unsigned, or not readable: refused or skipped, and the question stays open.
            forged = await fake.post_interaction_http(url, payload, "not-the-secret")
            assert forged.status == 401
            junk = await fake.post_raw_http(url, b"payload=%7Bnot+json", SIGNING_SECRET,
                                            content_type="application/x-www-form-urlencoded")
            assert junk.status == 200
            assert "actions" in types(question)

            delivery = await fake.post_interaction_http(url, payload, SIGNING_SECRET)
            assert delivery.status == 200
            await reply_to(fake, event["channel"], got({"confirmed": True}))
            await shows_answer(fake, question, "yes")
        assert "the interaction payload is not JSON" in daemon.log
        assert_no_secrets(daemon, fake)
