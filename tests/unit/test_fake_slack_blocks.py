"""The fake Slack's Block Kit and interactivity: strict where Slack is (limits, shapes, what
chat.update does to blocks, clicks only on buttons that are there)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

CHANNEL = "C0BLOCKS"


def section(text: str = "hi", kind: str = "mrkdwn", **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": kind, "text": text}, **extra}


def button(text: str = "Yes", action_id: str = "a1", **extra: Any) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": text},
            "action_id": action_id, **extra}


def actions(*elements: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "actions", "elements": list(elements), **extra}


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        server.register_channel(CHANNEL)
        yield server


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=fake.bot_token, base_url=fake.api_url, retry_handlers=[])


async def refused(client: AsyncWebClient, blocks: list[dict[str, Any]]) -> str:
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=CHANNEL, text="t", blocks=blocks)
    assert caught.value.response["error"] == "invalid_blocks"
    errors = caught.value.response["errors"]
    return str(errors[0])


async def test_blocks_are_kept_as_slack_returns_them(fake: FakeSlack,
                                                     client: AsyncWebClient) -> None:
    sent = [section("*q*"), actions(button("Yes", "y", value="d:1:y", style="primary"),
                                    button("No", "n"), block_id="q.1")]
    answer = await client.chat_postMessage(channel=CHANNEL, text="q", blocks=sent)
    (posted,) = fake.posted_messages(CHANNEL)
    assert posted.blocks is not None and posted.blocks == answer["message"]["blocks"]
    first, second = posted.blocks
    assert first["text"] == {"type": "mrkdwn", "text": "*q*", "verbatim": False}
    assert isinstance(first["block_id"], str) and second["block_id"] == "q.1"
    assert second["elements"][0] == {"type": "button", "action_id": "y", "value": "d:1:y",
                                     "style": "primary",
                                     "text": {"type": "plain_text", "text": "Yes",
                                              "emoji": True}}
    # Form-encoded (blocks as a JSON string) works the same.
    await client.api_call("chat.postMessage", data={
        "channel": CHANNEL, "text": "f", "blocks": json.dumps([section("f")])})
    assert fake.posted_messages(CHANNEL)[1].blocks is not None


@pytest.mark.parametrize(("blocks", "problem"), [
    ([section("x" * 3001)], "less than 3001"),
    ([section("")], "non-empty"),
    ([section("x", kind="markdown")], "must be one of"),
    ([section("x", fields=[])], "unsupported fields"),
    ([actions(*[button(action_id=f"a{n}") for n in range(26)])], "at most 25"),
    ([actions()], "non-empty"),
    ([actions(button("x" * 76))], "less than 76"),
    ([actions(button(action_id=""))], "1-255"),
    ([actions(button(action_id="a" * 256))], "1-255"),
    ([actions(button(action_id="same"), button(action_id="same"))], "unique in the block"),
    ([actions(button(value="v" * 2001))], "at most 2000"),
    ([actions(button(style="green"))], "primary or danger"),
    ([actions(button(url="https://example.com"))], "unsupported fields"),
    ([actions({"type": "static_select", "action_id": "s"})], "only buttons"),
    ([actions({"type": "button", "text": {"type": "mrkdwn", "text": "*b*"},
               "action_id": "b"})], "must be one of"),
    ([section(block_id="b"), section(block_id="b")], "unique in the message"),
    ([section(block_id="x" * 256)], "1-255"),
    ([section() for _ in range(51)], "at most 50"),
    ([{"type": "header", "text": {"type": "plain_text", "text": "h"}}], "does not model"),
])
async def test_blocks_slack_refuses(client: AsyncWebClient, blocks: list[Any],
                                    problem: str) -> None:
    assert problem in await refused(client, blocks)


async def test_limits_are_inclusive(fake: FakeSlack, client: AsyncWebClient) -> None:
    await client.chat_postMessage(channel=CHANNEL, text="t", blocks=[
        *[section("x" * 3000) for _ in range(49)],
        actions(*[button("b" * 75, f"a{n}", value="v" * 2000) for n in range(25)])])
    assert len(fake.posted_messages(CHANNEL)[0].blocks or ()) == 50


async def test_chat_update_and_blocks(fake: FakeSlack, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="q",
                                           blocks=[section("q"), actions(button())])
    ts = posted["ts"]
    (message,) = fake.posted_messages(CHANNEL)
    await client.chat_update(channel=CHANNEL, ts=ts, text="q2", blocks=[section("q2")])
    assert [b["type"] for b in message.blocks or ()] == ["section"]
    assert message.edits[-1]["blocks"] is not None and message.text == "q2"
    # Text alone drops the blocks (Slack's documented rule), and so does an empty list.
    await client.chat_update(channel=CHANNEL, ts=ts, text="plain")
    assert message.blocks is None
    stored = fake.message(CHANNEL, ts)
    assert stored is not None and "blocks" not in stored
    await client.chat_update(channel=CHANNEL, ts=ts, text="again", blocks=[section("b")])
    await client.chat_update(channel=CHANNEL, ts=ts, text="again", blocks=[])
    assert message.blocks is None


async def test_a_click_is_a_block_actions_payload_of_a_button_on_screen(
        fake: FakeSlack, client: AsyncWebClient) -> None:
    parent = await client.chat_postMessage(channel=CHANNEL, text="parent")
    await client.chat_postMessage(channel=CHANNEL, text="q", thread_ts=parent["ts"], blocks=[
        section("q"), actions(button("Yes", "d:1:y", value="d:1:y"), block_id="q.1")])
    question = fake.posted_messages(CHANNEL)[1]
    body = fake.block_actions_payload(question, user="U0PERSON", text="Yes")
    assert body["type"] == "block_actions" and body["user"]["id"] == "U0PERSON"
    assert body["channel"]["id"] == CHANNEL
    assert body["container"] == {"type": "message", "message_ts": question.ts,
                                 "channel_id": CHANNEL, "is_ephemeral": False,
                                 "thread_ts": parent["ts"]}
    assert body["message"]["blocks"] == question.blocks
    assert body["message"]["thread_ts"] == parent["ts"]
    (action,) = body["actions"]
    assert (action["action_id"], action["value"], action["block_id"]) == (
        "d:1:y", "d:1:y", "q.1")
    with pytest.raises(LookupError):
        fake.block_actions_payload(question, text="No")
    await client.chat_update(channel=CHANNEL, ts=question.ts, text="done", blocks=[])
    with pytest.raises(LookupError):  # the buttons are gone from the screen
        fake.block_actions_payload(question, text="Yes")


async def test_a_click_over_socket_mode_is_an_interactive_envelope(fake: FakeSlack) -> None:
    envelope = await fake.send_interaction({"type": "block_actions", "actions": []})
    assert envelope["type"] == "interactive" and not envelope["accepts_response_payload"]
    assert fake.pending_envelopes == [envelope]  # waits for a socket, like any envelope
