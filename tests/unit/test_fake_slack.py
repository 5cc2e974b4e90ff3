"""Faithfulness tests for tests/fakes/slack/, driven by the real slack-sdk and slack-bolt.

If these pass, the bridge's Slack tests exercise the same client code paths production uses.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.server import UPLOAD
from tests.fakes.slack import (
    DEFAULT_CHANNEL,
    DEFAULT_USER,
    MAX_TEXT_CHARS,
    FakeSlack,
)

TS_RE = re.compile(r"^\d{10}\.\d{6}$")
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"

Listener = Callable[[AsyncBaseSocketModeClient, SocketModeRequest], Awaitable[None]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(ack_timeout=0.4) as f:
        yield f


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)


async def _error_of(call: Awaitable[Any]) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        await call
    return info.value


@asynccontextmanager
async def socket_client(
    fake: FakeSlack, listener: Listener | None = None, *, ack: bool = True
) -> AsyncIterator[tuple[SocketModeClient, list[dict[str, Any]]]]:
    """A real SocketModeClient connected to the fake; yields it and every raw message seen."""
    seen: list[dict[str, Any]] = []
    hello = asyncio.Event()
    sm = SocketModeClient(
        app_token=fake.app_token,
        web_client=AsyncWebClient(base_url=fake.api_url),
        ping_interval=1,
    )

    async def record(_: Any, message: dict[str, Any], raw: str | None) -> None:
        seen.append(message)
        if message.get("type") == "hello":
            hello.set()

    async def acker(c: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    sm.message_listeners.append(record)
    if listener is not None:
        sm.socket_mode_request_listeners.append(listener)
    elif ack:
        sm.socket_mode_request_listeners.append(acker)
    await sm.connect()  # type: ignore[no-untyped-call]
    try:
        # Client-side state does not wake fake.wait_for, so the hello is awaited directly.
        await asyncio.wait_for(hello.wait(), 10)
        yield sm, seen
    finally:
        await sm.close()  # type: ignore[no-untyped-call]


# ------------------------------------------------------------------ Web API


async def test_auth_test_identifies_the_bot(fake: FakeSlack, client: AsyncWebClient) -> None:
    resp = await client.auth_test()
    assert resp["ok"] is True
    assert resp["user_id"] == fake.bot_user_id
    assert resp["bot_id"] == fake.bot_id
    assert resp["team_id"] == fake.team_id
    assert fake.calls_to("auth.test")[0].token == fake.bot_token


async def test_bad_tokens_are_rejected_like_slack(fake: FakeSlack) -> None:
    wrong = AsyncWebClient(token="xoxb-wrong", base_url=fake.api_url)
    err = await _error_of(wrong.auth_test())
    assert err.response.status_code == 200  # Slack reports auth errors with HTTP 200
    assert err.response["error"] == "invalid_auth"

    err = await _error_of(AsyncWebClient(base_url=fake.api_url).auth_test())
    assert err.response["error"] == "not_authed"

    app_token_client = AsyncWebClient(token=fake.app_token, base_url=fake.api_url)
    err = await _error_of(app_token_client.chat_postMessage(channel=DEFAULT_CHANNEL, text="x"))
    assert err.response["error"] == "not_allowed_token_type"

    bot = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
    err = await _error_of(bot.apps_connections_open(app_token=fake.bot_token))
    assert err.response["error"] == "not_allowed_token_type"
    err = await _error_of(bot.apps_connections_open(app_token="xapp-wrong"))
    assert err.response["error"] == "invalid_auth"

    opened = await bot.apps_connections_open(app_token=fake.app_token)
    assert str(opened["url"]).startswith(f"ws://127.0.0.1:{fake.port}/socket?ticket=")


async def test_post_message_ok_and_ts_increasing(fake: FakeSlack, client: AsyncWebClient) -> None:
    fake.register_channel(DEFAULT_CHANNEL, name="general")
    first = await client.chat_postMessage(channel=DEFAULT_CHANNEL, text="*hi*")
    reply = await client.chat_postMessage(
        channel="#general", text="in thread", thread_ts=first["ts"]
    )
    # Form-encoded bodies are accepted too.
    form = await client.api_call(
        "chat.postMessage", data={"channel": DEFAULT_CHANNEL, "text": "form"}
    )
    assert first["channel"] == DEFAULT_CHANNEL and reply["channel"] == DEFAULT_CHANNEL
    tss = [first["ts"], reply["ts"], form["ts"]]
    assert all(TS_RE.match(ts) for ts in tss)
    assert tss == sorted(tss, key=float) and len(set(tss)) == 3
    assert first["message"]["user"] == fake.bot_user_id
    assert first["message"]["bot_id"] == fake.bot_id

    posted = fake.posted_messages(channel=DEFAULT_CHANNEL)
    assert [m.text for m in posted] == ["*hi*", "in thread", "form"]
    assert [m.text for m in fake.posted_messages(thread_ts=first["ts"])] == ["in thread"]
    parent = fake.message(DEFAULT_CHANNEL, first["ts"])
    assert parent is not None and parent["reply_count"] == 1


async def test_post_message_limits(fake: FakeSlack, client: AsyncWebClient) -> None:
    fake.register_channel(DEFAULT_CHANNEL)
    ok = await client.chat_postMessage(channel=DEFAULT_CHANNEL, text="x" * MAX_TEXT_CHARS)
    assert ok["ok"]

    err = await _error_of(
        client.chat_postMessage(channel=DEFAULT_CHANNEL, text="x" * (MAX_TEXT_CHARS + 1))
    )
    assert err.response["error"] == "msg_too_long"

    # Block Kit is checked as Slack checks it (test_fake_slack_blocks.py); a block the fake
    # does not model is refused, and says so.
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "y"}}]
    err = await _error_of(client.chat_postMessage(channel=DEFAULT_CHANNEL, text="t", blocks=blocks))
    assert err.response["error"] == "invalid_blocks"
    assert "does not model 'header'" in err.response["errors"][0]
    form = await _error_of(client.api_call(
        "chat.postMessage",
        data={"channel": DEFAULT_CHANNEL, "text": "t", "blocks": json.dumps(blocks)},
    ))
    assert form.response["error"] == "invalid_blocks"

    with pytest.warns(UserWarning, match="text"):
        err = await _error_of(client.chat_postMessage(channel=DEFAULT_CHANNEL, text=""))
    assert err.response["error"] == "no_text"

    err = await _error_of(client.chat_postMessage(channel="C0NOPE", text="hi"))
    assert err.response["error"] == "channel_not_found"

    err = await _error_of(
        client.chat_update(channel=DEFAULT_CHANNEL, ts=ok["ts"], text="z" * (MAX_TEXT_CHARS + 1))
    )
    assert err.response["error"] == "msg_too_long"
    err = await _error_of(client.chat_postEphemeral(
        channel=DEFAULT_CHANNEL, user=fake.bot_user_id, text="e" * (MAX_TEXT_CHARS + 1)))
    assert err.response["error"] == "msg_too_long"
    assert len(fake.posted_messages()) == 1  # nothing recorded for rejected calls
    assert fake.posted_messages()[0].text == "x" * MAX_TEXT_CHARS


async def test_rate_limit_has_retry_after_and_sdk_retries(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    fake.register_channel(DEFAULT_CHANNEL)
    fake.fail_next("chat.postMessage", status=429, retry_after=7)
    err = await _error_of(client.chat_postMessage(channel=DEFAULT_CHANNEL, text="a"))
    assert err.response.status_code == 429
    assert err.response["error"] == "ratelimited"
    assert err.response.headers["Retry-After"] == "7"

    retrying = AsyncWebClient(
        token=fake.bot_token,
        base_url=fake.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
    fake.fail_next("chat.postMessage", status=429, retry_after=0, times=2)
    resp = await retrying.chat_postMessage(channel=DEFAULT_CHANNEL, text="b")
    assert resp["ok"]
    attempts = fake.calls_to("chat.postMessage")[1:]
    assert [c.status for c in attempts] == [429, 429, 200]
    assert [m.text for m in fake.posted_messages()] == ["b"]


async def test_server_errors_and_flood_mode(fake: FakeSlack, client: AsyncWebClient) -> None:
    fake.register_channel(DEFAULT_CHANNEL)
    fake.fail_next("chat.postMessage", status=500)
    err = await _error_of(client.chat_postMessage(channel=DEFAULT_CHANNEL, text="a"))
    assert err.response.status_code == 500

    retrying = AsyncWebClient(
        token=fake.bot_token,
        base_url=fake.api_url,
        retry_handlers=[AsyncServerErrorRetryHandler(max_retry_count=1)],
    )
    fake.fail_next("chat.postMessage", status=503)
    assert (await retrying.chat_postMessage(channel=DEFAULT_CHANNEL, text="b"))["ok"]

    fake.fail_next("reactions.add", status=200, error="invalid_name")
    err = await _error_of(client.reactions_add(channel=DEFAULT_CHANNEL, timestamp="1.2", name="x"))
    assert err.response["error"] == "invalid_name"

    fake.set_flood(3)
    statuses = []
    for i in range(6):
        try:
            await client.chat_postMessage(channel=DEFAULT_CHANNEL, text=str(i))
            statuses.append(200)
        except SlackApiError as exc:
            statuses.append(exc.response.status_code)
    assert statuses == [200, 200, 429, 200, 200, 429]
    fake.set_flood(0)
    assert (await client.chat_postMessage(channel=DEFAULT_CHANNEL, text="c"))["ok"]


async def test_files_upload_v2_round_trip(fake: FakeSlack, client: AsyncWebClient) -> None:
    channel = fake.dm_channel(DEFAULT_USER)
    parent = await client.chat_postMessage(channel=channel, text="parent")
    content = b"\x00binary\xffreport" * 100
    resp = await client.files_upload_v2(
        channel=channel,
        content=content,
        filename="report.bin",
        title="Report",
        initial_comment="here you go",
        thread_ts=parent["ts"],
    )
    assert resp["ok"]
    file_id = resp["file"]["id"]
    assert resp["file"]["title"] == "Report"

    (upload,) = fake.uploaded_files
    assert upload.file_id == file_id and upload.content == content and upload.completed
    assert upload.channel == channel and upload.thread_ts == parent["ts"]
    assert upload.initial_comment == "here you go"

    (share,) = [m for m in fake.posted_messages(channel) if m.kind == "file_share"]
    assert share.text == "here you go" and share.thread_ts == parent["ts"]
    assert share.files[0]["id"] == file_id

    info = await client.files_info(file=file_id)
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            info["file"]["url_private_download"],
            headers={"Authorization": f"Bearer {fake.bot_token}"},
        ) as got,
    ):
        assert got.status == 200
        assert await got.read() == content

    # A second completion of the same file, or one never uploaded, fails like Slack.
    err = await _error_of(client.files_completeUploadExternal(files=[{"id": file_id}]))
    assert err.response["error"] == "file_not_found"

    fake.fail_next(UPLOAD, status=500)
    with pytest.raises(Exception, match="Failed to upload a file"):
        await client.files_upload_v2(channel=channel, content=b"x", filename="x.txt")


async def test_reactions_add_remove_errors(fake: FakeSlack, client: AsyncWebClient) -> None:
    event = fake.dm_message("hi")
    await fake.send_event(event)  # makes the user's message known, as in real Slack
    channel, ts = event["channel"], event["ts"]

    await client.reactions_add(channel=channel, timestamp=ts, name="eyes")
    err = await _error_of(client.reactions_add(channel=channel, timestamp=ts, name="eyes"))
    assert err.response["error"] == "already_reacted"
    assert fake.reactions_on(channel, ts) == ["eyes"]

    await client.reactions_remove(channel=channel, timestamp=ts, name="eyes")
    err = await _error_of(client.reactions_remove(channel=channel, timestamp=ts, name="eyes"))
    assert err.response["error"] == "no_reaction"
    assert fake.reactions_on(channel, ts) == []

    err = await _error_of(client.reactions_add(channel=channel, timestamp="1.000001", name="x"))
    assert err.response["error"] == "message_not_found"
    err = await _error_of(client.reactions_add(channel=channel, timestamp=ts, name=":eyes:"))
    assert err.response["error"] == "invalid_name"
    assert [(r.action, r.name) for r in fake.reaction_log] == [("add", "eyes"), ("remove", "eyes")]


async def test_file_download_requires_bot_token(fake: FakeSlack) -> None:
    obj = fake.add_file(b"%PDF-1.4 data", "doc one.pdf", "application/pdf")
    assert obj["size"] == 13 and obj["mimetype"] == "application/pdf"
    assert obj["url_private_download"].startswith(f"{fake.url}/files-pri/")
    async with aiohttp.ClientSession() as http:
        auth = {"Authorization": f"Bearer {fake.bot_token}"}
        async with http.get(obj["url_private_download"], headers=auth) as ok:
            assert ok.status == 200 and ok.content_type == "application/pdf"
            assert await ok.read() == b"%PDF-1.4 data"
        async with http.get(obj["url_private"]) as anon:
            assert anon.status == 200  # like Slack: a login page, not an error status
            assert anon.content_type == "text/html"
            assert (await anon.text()).lstrip().startswith("<!DOCTYPE html>")
        wrong = {"Authorization": "Bearer xoxb-wrong"}
        async with http.get(obj["url_private_download"], headers=wrong) as bad:
            assert bad.content_type == "text/html"
    assert [d.authorized for d in fake.downloads] == [True, False, False]


async def test_conversation_lookups_update_ephemeral_status(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    root = fake.channel_message("question", user="U0ALICE")
    await fake.send_event(root)
    await fake.send_event(fake.channel_message("more", user="U0ALICE", thread_ts=root["ts"]))
    answer = await client.chat_postMessage(
        channel=DEFAULT_CHANNEL, text="draft", thread_ts=root["ts"]
    )
    await client.chat_update(channel=DEFAULT_CHANNEL, ts=answer["ts"], text="final")

    replies = await client.conversations_replies(channel=DEFAULT_CHANNEL, ts=root["ts"])
    assert [m["text"] for m in replies["messages"]] == ["question", "more", "final"]
    page = await client.conversations_replies(channel=DEFAULT_CHANNEL, ts=root["ts"], limit=2)
    assert page["has_more"] and page["response_metadata"]["next_cursor"]

    (posted,) = fake.posted_messages(DEFAULT_CHANNEL)
    assert posted.text == "final" and posted.edits[0]["text"] == "draft"
    err = await _error_of(client.chat_update(channel=DEFAULT_CHANNEL, ts=root["ts"], text="x"))
    assert err.response["error"] == "cant_update_message"

    opened = await client.conversations_open(users="U0ALICE")
    assert opened["channel"]["id"] == fake.dm_channel("U0ALICE")
    err = await _error_of(client.conversations_open(users="U0NOBODY"))
    assert err.response["error"] == "user_not_found"

    await client.chat_delete(channel=DEFAULT_CHANNEL, ts=answer["ts"])
    assert fake.posted_messages(DEFAULT_CHANNEL) == []
    err = await _error_of(client.chat_delete(channel=DEFAULT_CHANNEL, ts=answer["ts"]))
    assert err.response["error"] == "message_not_found"

    await client.chat_postEphemeral(channel=DEFAULT_CHANNEL, user="U0ALICE", text="psst")
    assert fake.ephemeral_messages[0].text == "psst"

    await client.assistant_threads_setStatus(
        channel_id=DEFAULT_CHANNEL, thread_ts=root["ts"], status="is thinking..."
    )
    assert fake.assistant_statuses[0].status == "is thinking..."


# ------------------------------------------------------------------ Socket Mode


async def test_socket_hello_event_delivery_and_ack(fake: FakeSlack) -> None:
    got: list[SocketModeRequest] = []

    async def listener(c: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        got.append(req)
        await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    async with socket_client(fake, listener) as (_, seen):
        hello = seen[0]
        assert hello["type"] == "hello" and hello["num_connections"] == 1
        assert hello["connection_info"] == {"app_id": fake.app_id}

        event = fake.dm_message("hello bot")
        envelope = await fake.send_event(event)
        ack = await fake.wait_for_ack(envelope["envelope_id"])
        assert ack.known

    (req,) = got
    assert req.type == "events_api" and req.retry_attempt == 0
    payload = req.payload
    assert payload["type"] == "event_callback" and payload["event_id"].startswith("Ev")
    assert payload["team_id"] == fake.team_id and payload["api_app_id"] == fake.app_id
    assert payload["event"]["channel_type"] == "im"
    assert payload["event"]["channel"].startswith("D")
    assert payload["event"]["text"] == "hello bot"
    assert fake.ack_timeouts == [] and fake.redeliveries == []


async def test_unacked_envelope_is_redelivered(fake: FakeSlack) -> None:
    got: list[SocketModeRequest] = []

    async def ack_second_time_only(c: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        got.append(req)
        if req.retry_attempt:
            await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    async with socket_client(fake, ack_second_time_only):
        first = await fake.send_event(fake.channel_message("are you there?"))
        await fake.wait_for(lambda: fake.acks)

    assert [r.retry_attempt for r in got] == [0, 1]
    assert got[1].retry_reason == "timeout"
    assert got[0].payload["event_id"] == got[1].payload["event_id"]
    assert got[0].envelope_id != got[1].envelope_id
    assert fake.ack_timeouts == [first["envelope_id"]]
    assert fake.redeliveries[0].envelope_id == got[1].envelope_id


async def test_redelivery_reaches_a_reconnected_socket(fake: FakeSlack) -> None:
    got: list[tuple[int, SocketModeRequest]] = []

    async def ack_retries_only(c: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        got.append((fake.socket_connects, req))
        if req.retry_attempt:
            await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    async with socket_client(fake, ack_retries_only):
        await fake.send_event(fake.dm_message("lost in transit"))
        await fake.wait_for(lambda: fake.deliveries)
        await fake.drop_socket_connections(abrupt=True)
        await fake.wait_for(lambda: fake.acks, timeout=15)

    (first_conn, first), (second_conn, second) = got
    assert (first.retry_attempt, second.retry_attempt) == (0, 1)
    assert first_conn == 1 and second_conn == 2
    assert fake.deliveries[0].connection_id != fake.deliveries[1].connection_id


async def test_retries_stop_after_three(fake: FakeSlack) -> None:
    fake.ack_timeout = 0.1
    async with socket_client(fake, ack=False):
        env = await fake.send_event(fake.dm_message("ignored"))
        event_id = env["payload"]["event_id"]
        # Once the fourth timeout is handled nothing is scheduled any more: no fifth delivery.
        await fake.wait_for(lambda: len(fake.ack_timeouts) == 4 and fake.idle)
    assert [d.retry_attempt for d in fake.envelopes_for(event_id)] == [0, 1, 2, 3]


async def test_double_event_and_manual_duplicate(fake: FakeSlack) -> None:
    got: list[SocketModeRequest] = []

    async def listener(c: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        got.append(req)
        await c.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    async with socket_client(fake, listener):
        env_message, env_mention = await fake.send_mention("summarise this")
        await fake.wait_for(lambda: len(fake.acks) == 2)
        message = env_message["payload"]["event"]
        mention = env_mention["payload"]["event"]
        dup = await fake.redeliver(env_mention["payload"]["event_id"])
        await fake.wait_for(lambda: len(fake.acks) == 3)

    assert message["type"] == "message" and mention["type"] == "app_mention"
    assert message["channel"] == mention["channel"] == DEFAULT_CHANNEL
    assert message["ts"] == mention["ts"]
    assert mention["text"] == f"<@{fake.bot_user_id}> summarise this"
    assert env_message["payload"]["event_id"] != env_mention["payload"]["event_id"]
    assert [r.payload["event"]["type"] for r in got] == ["message", "app_mention", "app_mention"]
    assert dup["payload"]["event_id"] == env_mention["payload"]["event_id"]
    assert dup["retry_attempt"] == 1 and got[2].retry_attempt == 1


async def test_reconnect_after_drop_and_disconnect_message(fake: FakeSlack) -> None:
    async with socket_client(fake) as (_, seen):
        await fake.drop_socket_connections()
        await fake.wait_for(lambda: fake.socket_connects == 2 and fake.connection_count == 1)
        env = await fake.send_event(fake.dm_message("after drop"))
        await fake.wait_for_ack(env["envelope_id"])

        await fake.send_disconnect("refresh_requested")
        await fake.wait_for(lambda: fake.socket_connects == 3 and fake.connection_count == 1)
        env = await fake.send_event(fake.dm_message("after refresh"))
        await fake.wait_for_ack(env["envelope_id"])
    assert len(fake.calls_to("apps.connections.open")) == 3
    assert [m["type"] for m in seen if m.get("type") == "hello"] == ["hello"] * 3


async def test_event_sent_while_disconnected_waits_for_socket(fake: FakeSlack) -> None:
    env = await fake.send_event(fake.dm_message("early"))
    assert fake.deliveries == []
    async with socket_client(fake):
        await fake.wait_for_ack(env["envelope_id"])


async def test_slash_command_over_socket(fake: FakeSlack) -> None:
    async def listener(c: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        await c.send_socket_mode_response(
            SocketModeResponse(envelope_id=req.envelope_id, payload={"text": "started"})
        )

    async with socket_client(fake, listener):
        env = await fake.send_slash_command("/new", "fresh start")
        ack = await fake.wait_for_ack(env["envelope_id"])
    assert env["type"] == "slash_commands" and env["accepts_response_payload"] is True
    assert env["payload"]["command"] == "/new" and env["payload"]["text"] == "fresh start"
    assert env["payload"]["response_url"].startswith(fake.url)
    assert ack.payload == {"text": "started"}


async def test_bolt_app_over_socket_mode_ignores_its_own_messages(fake: FakeSlack) -> None:
    app = AsyncApp(client=AsyncWebClient(token=fake.bot_token, base_url=fake.api_url))
    seen: list[dict[str, Any]] = []

    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        seen.append(event)

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], say: Any) -> None:
        seen.append(event)
        await say(text="on it", thread_ts=event["ts"])

    handler = AsyncSocketModeHandler(app, fake.app_token, ping_interval=1)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    try:
        await fake.wait_for_socket()
        own = await fake.send_event(fake.bot_message("my own reply", own=True))
        await fake.send_mention("hi")
        await fake.wait_for(lambda: len(fake.acks) == 3)
        reply = await fake.wait_for_message(channel=DEFAULT_CHANNEL)
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]

    assert own["envelope_id"] in fake.acked_envelope_ids  # acked, but not handled
    assert sorted(e["type"] for e in seen) == ["app_mention", "message"]
    assert reply.text == "on it" and reply.thread_ts == seen[0]["ts"]
    assert fake.calls_to("auth.test"), "bolt identifies the bot through auth.test"


def test_event_builders_shapes(fake: FakeSlack) -> None:
    original = fake.dm_message("first")
    changed = fake.message_changed(original, "second")
    assert changed["subtype"] == "message_changed" and changed["hidden"] is True
    assert changed["message"]["ts"] == original["ts"] and changed["message"]["text"] == "second"
    deleted = fake.message_deleted(original)
    assert deleted["deleted_ts"] == original["ts"]
    other_bot = fake.bot_message("beep")
    assert other_bot["subtype"] == "bot_message" and "user" not in other_bot
    own = fake.bot_message("me", own=True)
    assert own["user"] == fake.bot_user_id and "subtype" not in own
    f = fake.add_file(b"img", "cat.png", "image/png")
    share = fake.file_share_message([f], "look")
    assert share["subtype"] == "file_share" and share["files"][0]["url_private_download"]
    reply = fake.channel_message("r", thread_ts=original["ts"])
    assert reply["thread_ts"] == original["ts"] and reply["channel_type"] == "channel"
    assert TS_RE.match(reply["ts"]) and float(reply["ts"]) > float(original["ts"])


# ------------------------------------------------------------------ HTTP mode


async def test_signing_helper_matches_sdk_verifier(fake: FakeSlack) -> None:
    body = json.dumps(fake.event_payload(fake.dm_message("signed"))).encode()
    headers = fake.sign(body, SECRET)
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid_request(body, headers)
    assert not verifier.is_valid_request(body + b" ", headers)
    assert not SignatureVerifier("other-secret").is_valid_request(body, headers)
    stale = fake.sign(body, SECRET, timestamp=int(time.time()) - 600)
    assert not verifier.is_valid_request(body, stale)


async def test_post_event_http_reaches_a_verifying_server(fake: FakeSlack) -> None:
    received: list[dict[str, Any]] = []
    verifier = SignatureVerifier(SECRET)

    async def events(request: web.Request) -> web.Response:
        body = await request.read()
        if not verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        received.append(
            {"body": json.loads(body), "retry": request.headers.get("X-Slack-Retry-Num")}
        )
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/slack/events", events)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    try:
        first = await fake.post_event_http(url, fake.dm_message("via http"), SECRET)
        again = await fake.post_event_http(
            url, first.payload["event"], SECRET, event_id=first.payload["event_id"], retry_num=1
        )
        rejected = await fake.post_event_http(url, fake.dm_message("x"), "wrong-secret")
    finally:
        await runner.cleanup()
    assert first.status == 200 and again.status == 200 and rejected.status == 401
    assert received[0]["body"]["event"]["text"] == "via http"
    assert received[1]["body"]["event_id"] == received[0]["body"]["event_id"]
    assert received[1]["retry"] == "1"


async def test_a_commands_response_url_takes_five_answers_with_text_as_slack_does(
        fake: FakeSlack) -> None:
    url = fake.slash_command_payload("/picobridge", "status", user="U0ALICE")["response_url"]
    async with aiohttp.ClientSession() as session:
        async def post(target: str, body: object) -> tuple[int, str]:
            async with session.post(target, json=body) as resp:
                return resp.status, await resp.text()

        assert await post(url, {"response_type": "ephemeral"}) == (400, "no_text")
        assert await post(url + "0", {"text": "hi"}) == (404, "no_service")  # not issued
        for n in range(5):
            assert await post(url, {"text": f"answer {n}"}) == (200, "ok")
        assert await post(url, {"text": "a sixth"}) == (404, "used_url")
    assert [(r.user, r.text, r.response_type) for r in fake.command_responses] == [
        ("U0ALICE", f"answer {n}", "ephemeral") for n in range(5)]
