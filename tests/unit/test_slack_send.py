"""Reply delivery to Slack (adapters/slack_send.py) against FakeSlack, through real slack-sdk."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.slack.render import render_slack
from picobridge.adapters.slack.send import EMPTY_REPLY, LONG_REPLY_NOTE, SlackSender, StreamTarget
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind
from tests.fakes.slack import DEFAULT_CHANNEL, DEFAULT_USER, FakeSlack

CHAT = ChatRef("slack", DEFAULT_CHANNEL, "1700000000.000100")


class Cursors:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.writes: list[tuple[str, str]] = []

    async def get_cursor(self, name: str) -> str | None:
        return self.values.get(name)

    async def set_cursor(self, name: str, value: str) -> None:
        self.values[name] = value
        self.writes.append((name, value))


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as f:
        f.register_channel(DEFAULT_CHANNEL, name="general")
        yield f


def sender(fake: FakeSlack, cursors: Cursors | None = None, *, max_chunks: int = 4,
           failures: list[str] | None = None) -> SlackSender:
    # No retry handlers: each test decides what Slack answers to each single request.
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url, retry_handlers=[])
    seen = failures if failures is not None else []
    return SlackSender(client, cursors or Cursors(), max_chunks=max_chunks,
                       on_auth_failure=seen.append, limit=1000)


def answer(text: str, **kw: object) -> OutgoingReply:
    return OutgoingReply(text, ReplyKind.ANSWER, **kw)  # type: ignore[arg-type]


def code_block(lines: int) -> str:
    body = "\n".join(f"print({i})  # a line of code that takes some room" for i in range(lines))
    return f"Here:\n\n```python\n{body}\n```\n\nDone."


async def test_parts_go_into_the_thread_in_order_without_breaking_code(fake: FakeSlack) -> None:
    await sender(fake).send(CHAT, answer(code_block(40)))
    posted = fake.posted_messages(DEFAULT_CHANNEL)
    assert len(posted) >= 2
    assert all(m.thread_ts == CHAT.thread_id for m in posted)
    assert all(len(m.text) <= 1000 for m in posted)
    for message in posted:
        assert message.text.count("```") % 2 == 0, message.text  # every part closes its code
    joined = "".join(m.text for m in posted)
    assert [f"print({i})" in joined for i in (0, 39)] == [True, True]
    assert joined.index("print(0)") < joined.index("print(39)")


async def test_rate_limit_becomes_retry_after(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", 429, retry_after=7)
    with pytest.raises(DeliveryError) as info:
        await sender(fake).send(CHAT, answer("hi"))
    assert info.value.retry_after == 7 and not info.value.permanent


@pytest.mark.parametrize(("status", "error", "permanent"), [
    (500, None, False),
    (503, None, False),
    (200, "channel_not_found", True),
    (200, "is_archived", True),
    (200, "internal_error", False),
])
async def test_failures_are_transient_or_permanent(fake: FakeSlack, status: int,
                                                   error: str | None, permanent: bool) -> None:
    fake.fail_next("chat.postMessage", status, error=error)
    with pytest.raises(DeliveryError) as info:
        await sender(fake).send(CHAT, answer("hi"))
    assert info.value.permanent is permanent


async def test_revoked_token_is_fatal_and_the_reply_kept(fake: FakeSlack) -> None:
    fake.revoke(fake.bot_token)
    failures: list[str] = []
    with pytest.raises(DeliveryError) as info:
        await sender(fake, failures=failures).send(CHAT, answer("hi"))
    assert failures == ["token_revoked"]
    assert not info.value.permanent
    assert fake.bot_token not in str(info.value)


async def test_retry_after_a_failure_midway_does_not_repost_parts(fake: FakeSlack) -> None:
    cursors = Cursors()
    out = sender(fake, cursors)
    reply = answer(code_block(40), outbox_id=7)
    fake.set_flood(2, methods=("chat.postMessage",))  # every second post is refused
    attempts = 0
    while True:
        attempts += 1
        try:
            await out.send(CHAT, reply)
            break
        except DeliveryError as exc:
            assert exc.retry_after is not None
    posted = [m.text for m in fake.posted_messages(DEFAULT_CHANNEL)]
    assert attempts > 1
    assert posted == render_slack(reply.text, 1000)  # each part once, in order
    # Progress was kept under the reply's outbox id, growing part by part, and emptied once
    # the reply was whole.
    assert {name for name, _ in cursors.writes} == {"slack.parts.7"}
    progress = [json.loads(value)["done"] for _, value in cursors.writes[:-1]]
    assert progress == [[str(n) for n in range(k)] for k in range(1, len(posted))]
    assert cursors.writes[-1][1] == ""


async def test_progress_survives_a_restart(fake: FakeSlack) -> None:
    cursors = Cursors()
    reply = answer(code_block(40), outbox_id=8)
    fake.fail_next("chat.postMessage", 200, error="internal_error")
    with pytest.raises(DeliveryError):
        await sender(fake, cursors).send(CHAT, reply)  # nothing posted yet
    assert cursors.writes == []

    first = sender(fake, cursors)
    fake.set_flood(2, methods=("chat.postMessage",))
    with pytest.raises(DeliveryError):
        await first.send(CHAT, reply)  # part one posted, part two refused
    fake.set_flood(0)
    assert len(fake.posted_messages(DEFAULT_CHANNEL)) == 1

    await sender(fake, cursors).send(CHAT, reply)  # a new process: memory is empty
    posted = [m.text for m in fake.posted_messages(DEFAULT_CHANNEL)]
    assert posted == render_slack(reply.text, 1000)
    assert cursors.values == {"slack.parts.8": ""}


async def test_a_permanent_refusal_midway_drops_the_progress(fake: FakeSlack) -> None:
    cursors = Cursors()
    reply = answer(code_block(40), outbox_id=9)
    fake.set_flood(2, methods=("chat.postMessage",))
    with pytest.raises(DeliveryError):
        await sender(fake, cursors).send(CHAT, reply)  # part one posted, part two refused
    fake.set_flood(0)
    assert json.loads(cursors.values["slack.parts.9"])["done"] == ["0"]
    fake.fail_next("chat.postMessage", 200, error="channel_not_found")
    with pytest.raises(DeliveryError) as refused:
        await sender(fake, cursors).send(CHAT, reply)
    # The outbox gives up on the reply: its progress is of no use any more.
    assert refused.value.permanent
    assert cursors.values["slack.parts.9"] == ""


async def test_private_notice_is_ephemeral_or_falls_back_to_a_reply(fake: FakeSlack) -> None:
    fake.register_user(DEFAULT_USER)
    out = sender(fake)
    await out.send(CHAT, OutgoingReply("only for you", ReplyKind.NOTICE,
                                       private_to=DEFAULT_USER))
    (notice,) = fake.ephemeral_messages
    assert (notice.user, notice.text, notice.thread_ts) == (
        DEFAULT_USER, "only for you", CHAT.thread_id)
    assert fake.posted_messages() == []

    await out.send(CHAT, OutgoingReply("still reaches them", ReplyKind.NOTICE,
                                       private_to="U0UNKNOWN"))
    assert [m.text for m in fake.posted_messages(DEFAULT_CHANNEL)] == ["still reaches them"]


async def test_long_reply_is_uploaded_as_a_file(fake: FakeSlack) -> None:
    text = "word " * 2000
    await sender(fake, max_chunks=2).send(CHAT, answer(text))
    (upload,) = fake.uploaded_files
    assert upload.completed and upload.content == text.encode()
    assert (upload.channel, upload.thread_ts) == (DEFAULT_CHANNEL, CHAT.thread_id)
    assert upload.initial_comment == LONG_REPLY_NOTE
    assert [m.kind for m in fake.posted_messages()] == ["file_share"]


async def test_streamed_message_is_replaced_by_the_answer(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
    streamed = await client.chat_postMessage(channel=DEFAULT_CHANNEL, text="partial …",
                                             thread_ts=CHAT.thread_id)
    target = StreamTarget(str(streamed["ts"]))
    await sender(fake).send(CHAT, answer("the **final** answer"), target)
    (message,) = fake.posted_messages(DEFAULT_CHANNEL)
    assert message.ts == target.ts and message.text == "the *final* answer"

    await sender(fake, max_chunks=1).send(CHAT, answer("long " * 500), target)
    assert fake.message(DEFAULT_CHANNEL, target.ts)["text"] == LONG_REPLY_NOTE  # type: ignore[index]
    assert fake.uploaded_files[-1].initial_comment is None


async def test_empty_answer_is_still_visible(fake: FakeSlack) -> None:
    await sender(fake).send(CHAT, answer("   "))
    assert [m.text for m in fake.posted_messages()] == [EMPTY_REPLY]
