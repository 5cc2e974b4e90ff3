"""The Slack adapter in-process (adapters/slack.py) against FakeSlack, with a stand-in bridge
that the tests can hold up, so ordering questions (when is an event acknowledged?) and
progress display can be checked precisely."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import picobridge.adapters.slack.adapter as slack_module
import picobridge.adapters.slack.context as context_module
import picobridge.adapters.slack.progress as progress_module
from picobridge.adapters.slack.adapter import SlackAdapter
from picobridge.adapters.slack.client import Recent, SlackAuthError
from picobridge.config.loader import settings_of
from picobridge.contract import (
    BridgeCommand,
    ChatRef,
    DialogAnswer,
    InboundMessage,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
    StorageUnavailable,
    SubmitResult,
    catalogue,
    listed_commands,
)
from picobridge.supervision import TaskSupervisor
from tests.fakes.slack import DEFAULT_CHANNEL, DEFAULT_USER, FakeSlack, PostedMessage


class StubBridge:
    """BridgeLink with a store that is a list, and a gate that can hold `submit` up."""

    def __init__(self) -> None:
        self.submitted: list[InboundMessage] = []
        self.calls = 0
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()
        self.refusing = False  # the "database" cannot store (StorageUnavailable)
        self.refused = asyncio.Event()  # set at each refusal
        self.allowed = {DEFAULT_USER}
        self.known: set[str] = set()
        self.cursors: dict[str, str] = {}
        self.fatals: list[str] = []
        self.connections: list[bool] = []
        self.app: web.Application | None = None
        self.loops = TaskSupervisor()

    async def submit(self, message: InboundMessage) -> SubmitResult:
        self.calls += 1
        self.entered.set()
        await self.gate.wait()
        if self.refusing:
            self.refused.set()
            raise StorageUnavailable("database is locked")
        if message.sender_id not in self.allowed:
            return SubmitResult.DENIED
        if any(m.platform_message_id == message.platform_message_id for m in self.submitted):
            return SubmitResult.DUPLICATE
        self.submitted.append(message)
        return SubmitResult.ACCEPTED

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        return user_id in self.allowed

    async def update_queued(self, platform: str, platform_message_id: str, text: str) -> bool:
        return False

    def commands(self, chat: ChatRef | None = None, *,
                 bot: str | None = None) -> tuple[BridgeCommand, ...]:
        return catalogue()

    def offered_commands(self, platform: str, kind: str | None = None
                         ) -> tuple[BridgeCommand, ...]:
        return catalogue()

    async def knows_chat(self, chat: ChatRef) -> bool:
        return chat.key in self.known

    async def get_cursor(self, name: str) -> str | None:
        return self.cursors.get(name)

    async def set_cursor(self, name: str, value: str) -> None:
        self.cursors[name] = value

    def heard_from(self, platform: str) -> None:
        pass

    def silence(self, platform: str, seconds: float | None) -> None:
        pass

    def rate_limited(self, platform: str) -> None:
        pass

    def connection_changed(self, platform: str, connected: bool) -> None:
        self.connections.append(connected)

    def http_app(self) -> web.Application | None:
        return self.app

    def fatal(self, platform: str, reason: str) -> None:
        self.fatals.append(reason)

    def keep_running(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        self.loops.start(name, loop)

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        return None  # no question was asked here: an answer does not count

    async def stop_running(self, name: str) -> None:
        await self.loops.cancel(name)


Make = Callable[..., "asyncio.Future[SlackAdapter]"]


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(ack_timeout=0.3) as f:
        yield f


@pytest.fixture
def bridge() -> StubBridge:
    return StubBridge()


@pytest.fixture
async def make(fake: FakeSlack, bridge: StubBridge,
               tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    started: list[SlackAdapter] = []

    async def build(start: bool = True, attachments: dict[str, Any] | None = None,
                    **slack: Any) -> SlackAdapter:
        # Raw values, validated by the model as the config file's are; the `slack` section is
        # a field only of the model built at run time (settings_model), which type checkers
        # see as the core model, hence the untyped keywords.
        values: dict[str, Any] = {"attachments": attachments or {}, "slack": {
            "bot_token": fake.bot_token, "app_token": fake.app_token,
            "base_url": fake.api_url, "file_hosts": ["127.0.0.1"], **slack}}
        settings = settings_of(state_dir=tmp_path, **values)
        adapter = SlackAdapter(settings)
        started.append(adapter)
        if start:
            await adapter.start(bridge)
        return adapter

    yield build
    for adapter in started:
        await adapter.stop()


async def test_event_is_acknowledged_only_after_the_commit(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    bridge.gate.clear()  # the "database" is slow
    envelope = await fake.send_event(fake.dm_message("hold on"))
    await asyncio.wait_for(bridge.entered.wait(), 5)
    # Slack gives up waiting and redelivers; neither copy may be acknowledged yet.
    again = await fake.wait_for(lambda: fake.redeliveries)
    assert envelope["envelope_id"] not in fake.acked_envelope_ids
    assert again[0].envelope_id not in fake.acked_envelope_ids
    bridge.gate.set()
    await fake.wait_for_ack(envelope["envelope_id"])
    await fake.wait_for_ack(again[0].envelope_id)
    assert [m.text for m in bridge.submitted] == ["hold on"]
    assert bridge.calls == 1  # the copy was recognised without asking the store again


async def test_messages_of_one_chat_keep_their_order(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    file = fake.add_file(b"x" * 200_000, "big.txt")
    await fake.send_event(fake.file_share_message([file], "first, with a file"))
    for text in ("second", "third"):
        await fake.send_event(fake.dm_message(text))
    await fake.wait_for(lambda: len(fake.acks) == 3)
    assert [m.text for m in bridge.submitted] == ["first, with a file", "second", "third"]


async def test_a_message_refused_behind_a_held_one_keeps_its_place(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    fake.max_retries = 0  # Slack does not send them again: only the adapter can
    adapter = await make()
    bridge.refusing = True
    for text in ("one", "two"):
        await fake.send_event(fake.dm_message(text))
    # "one" was refused and held; "two" was refused because "one" came first, and kept.
    while len(adapter._inbound.held) < 2:
        bridge.refused.clear()
        await asyncio.wait_for(bridge.refused.wait(), 10)
    bridge.refusing = False
    envelope = await fake.send_event(fake.dm_message("three"))
    await fake.wait_for_ack(envelope["envelope_id"])
    assert [m.text for m in bridge.submitted] == ["one", "two", "three"]
    assert len(adapter._inbound.held) == 0


async def test_a_message_right_after_a_slash_command_waits_for_it(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    fake.stall_next("conversations.open")  # the command is still asking which DM it is
    command = await fake.send_slash_command("/picobridge", "new")
    message = (await fake.send_event(fake.dm_message("after the command")))["envelope_id"]
    await fake.wait_for(lambda: message in fake.acked_envelope_ids + fake.ack_timeouts)
    fake.release("conversations.open")
    await fake.wait_for_ack(command["envelope_id"])
    await fake.wait_for_ack(message)
    assert [m.text for m in bridge.submitted] == ["/new", "after the command"]


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "RECEIPT_GRACE", 0.05)


async def test_reactions_and_progress_calls_do_not_wait_for_slack(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any], short_grace: None) -> None:
    adapter = await make()
    event = fake.dm_message("work on this")
    await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"]) == ["eyes"])
    chat = bridge.submitted[0].chat
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED,
                                                    message_ids=(event["ts"],)))
    await adapter.clear_progress(chat, Outcome.FAILED)
    assert fake.reactions_on(event["channel"], event["ts"]) == ["eyes"]  # not yet: in a task
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"]) == ["x"])
    assert [(r.action, r.name) for r in fake.reaction_log] == [
        ("add", "eyes"), ("remove", "eyes"), ("add", "x")]


async def test_a_fast_answer_gets_the_done_reaction_without_eyes_flicker(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    adapter = await make()
    event = fake.dm_message("quick one")
    await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    chat = bridge.submitted[0].chat
    ids = (event["ts"],)
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
    await adapter.clear_progress(chat, Outcome.DONE)
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"])
                        == ["white_check_mark"])
    assert [(r.action, r.name) for r in fake.reaction_log] == [("add", "white_check_mark")]


async def test_turn_of_a_message_received_before_a_restart_swaps_the_reaction(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any], short_grace: None) -> None:
    before = await make()
    event = fake.dm_message("from the previous run")
    await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"]) == ["eyes"])
    await before.stop()

    after = await make()  # a new process: it never saw this message arrive
    chat = ChatRef("slack", event["channel"], None)
    ids = (event["ts"],)
    await after.show_progress(chat, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
    await after.clear_progress(chat, Outcome.DONE)
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"])
                        == ["white_check_mark"])


async def test_requeued_turn_keeps_the_received_reaction(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any], short_grace: None) -> None:
    adapter = await make(reaction_received="hourglass", reaction_done="tada")
    event = fake.dm_message("again")
    await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"])
                        == ["hourglass"])
    chat = bridge.submitted[0].chat
    ids = (event["ts"],)
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
    await adapter.clear_progress(chat, Outcome.REQUEUED)
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
    await adapter.clear_progress(chat, Outcome.DONE)
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"]) == ["tada"])
    assert [(r.action, r.name) for r in fake.reaction_log] == [
        ("add", "hourglass"), ("remove", "hourglass"), ("add", "tada")]


async def test_assistant_thread_status_while_working(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    adapter = await make()
    dm = fake.dm_channel(DEFAULT_USER)
    thread = ChatRef("slack", dm, "1700000000.000100")
    await adapter.show_progress(thread, ProgressEvent(ProgressKind.STARTED))
    await adapter.clear_progress(thread, Outcome.DONE)
    await fake.wait_for(lambda: len(fake.assistant_statuses) == 2)
    assert [s.status for s in fake.assistant_statuses] == [progress_module.THINKING, ""]
    assert {s.thread_ts for s in fake.assistant_statuses} == {thread.thread_id}

    await adapter.show_progress(ChatRef("slack", dm, None), ProgressEvent(ProgressKind.STARTED))
    await adapter.show_progress(ChatRef("slack", DEFAULT_CHANNEL, "1.2"),
                                ProgressEvent(ProgressKind.STARTED))
    await fake.wait_for(lambda: fake.calls_to("auth.test"))  # a round trip to let tasks run
    assert len(fake.calls_to("assistant.threads.setStatus")) == 2


async def test_streaming_edits_one_message_that_becomes_the_answer(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "STREAM_INTERVAL", 0.1)
    adapter = await make(stream=True)
    fake.register_channel(DEFAULT_CHANNEL)
    chat = ChatRef("slack", DEFAULT_CHANNEL, "1700000000.000200")
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED))
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.TEXT, "Hello "))
    streamed = await fake.wait_for_message(DEFAULT_CHANNEL, chat.thread_id)
    assert streamed.text.startswith("Hello")
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.TEXT, "**world**"))
    await fake.wait_for(lambda: "*world*" in streamed.text)
    await adapter.clear_progress(chat, Outcome.DONE)
    await adapter.send_reply(chat, OutgoingReply("Hello **world**, done.", ReplyKind.ANSWER))
    assert [m.text for m in fake.posted_messages(DEFAULT_CHANNEL)] == ["Hello *world*, done."]
    assert len(fake.calls_to("chat.postMessage")) == 1

    # A failed turn's partial answer is taken down; the error reply stands alone.
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.TEXT, "Half an"))
    partial = await fake.wait_for(lambda: next(
        (m for m in fake.messages if m.text.startswith("Half")), None))
    await adapter.clear_progress(chat, Outcome.FAILED)
    await fake.wait_for(lambda: partial.deleted)


def starts_with(prefix: str, message: PostedMessage) -> bool:
    return message.text.startswith(prefix)


async def test_each_answer_replaces_its_own_stream_when_turns_finish_first(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "STREAM_INTERVAL", 0.1)
    adapter = await make(stream=True)
    fake.register_channel(DEFAULT_CHANNEL)
    chat = ChatRef("slack", DEFAULT_CHANNEL, "1700000000.000300")
    streams = []
    for turn, ts in enumerate(("1700000000.000301", "1700000000.000302")):
        ids = (ts,)
        await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
        await adapter.show_progress(chat, ProgressEvent(ProgressKind.TEXT, f"Answer {turn} so",
                                                        message_ids=ids))
        prefix = f"Answer {turn}"
        streams.append(await fake.wait_for_message(
            DEFAULT_CHANNEL, chat.thread_id, functools.partial(starts_with, prefix)))
        await adapter.clear_progress(chat, Outcome.DONE)
    # Both turns ended before either answer was sent (the outbox was held up).
    for turn, ts in enumerate(("1700000000.000301", "1700000000.000302")):
        await adapter.send_reply(chat, OutgoingReply(f"Answer {turn} in full", ReplyKind.ANSWER,
                                                     reply_to=ts, outbox_id=turn + 1))
    assert [m.text for m in streams] == ["Answer 0 in full", "Answer 1 in full"]
    assert [m.ts for m in fake.posted_messages(DEFAULT_CHANNEL)] == [m.ts for m in streams]


async def test_files_from_strangers_are_not_downloaded(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    file = fake.add_file(b"secret plans", "plans.txt", user="U0STRANGER")
    envelope = await fake.send_event(fake.file_share_message([file], user="U0STRANGER"))
    await fake.wait_for_ack(envelope["envelope_id"])
    assert fake.downloads == []
    assert bridge.calls == 1 and bridge.submitted == []  # denied, so the stranger is told


async def test_refused_files_are_explained_to_the_user(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make(attachments={"max_bytes": 1000, "inline_max_bytes": 500})
    big = fake.add_file(b"y" * 5000, "big.log")
    elsewhere = {**fake.add_file(b"z", "z.txt"),
                 "url_private_download": "https://evil.example.com/z.txt"}
    await fake.send_event(fake.file_share_message([big, elsewhere], ""))
    dm = fake.dm_channel(DEFAULT_USER)
    await fake.wait_for(lambda: len(fake.posted_messages(dm)) == 2)
    notices = sorted(m.text for m in fake.posted_messages(dm))
    assert "big.log" in notices[0] and "is 5,000 bytes" in notices[0]
    assert "up to 1,000 bytes" in notices[0]
    assert "z.txt" in notices[1] and "may not fetch" in notices[1]
    assert fake.downloads == [] and bridge.submitted == []


async def test_allowed_channels(fake: FakeSlack, bridge: StubBridge,
                                make: Callable[..., Any]) -> None:
    await make(allowed_channels=["C0OK"])
    _, refused = await fake.send_mention("hello?", channel="C0NOPE")
    await fake.wait_for(lambda: fake.ephemeral_messages)
    assert "not enabled" in fake.ephemeral_messages[0].text
    _, accepted = await fake.send_mention("hello!", channel="C0OK")
    await fake.wait_for_ack(accepted["envelope_id"])
    await fake.send_event(fake.dm_message("dm always works"))
    await fake.wait_for(lambda: len(bridge.submitted) == 2)
    assert [m.chat.chat_id for m in bridge.submitted] == ["C0OK", fake.dm_channel(DEFAULT_USER)]
    assert refused["envelope_id"] in fake.acked_envelope_ids


async def test_thread_follow_up_only_in_threads_the_bridge_knows(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    bridge.known.add(f"slack:{DEFAULT_CHANNEL}:1700000000.000300")
    for thread in ("1700000000.000300", "1700000000.000999"):
        event = fake.channel_message(f"reply in {thread}", thread_ts=thread)
        await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    assert [m.text for m in bridge.submitted] == ["reply in 1700000000.000300"]


async def test_slash_command_from_another_dm_is_answered_in_the_bots_dm(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    adapter = await make()
    body = fake.slash_command_payload("/picobridge", "new")
    body["channel_id"] = "D0SOMEONEELSE"
    assert await adapter.handle_command(body) is None
    (message,) = bridge.submitted
    assert message.text == "/new"
    assert message.chat == ChatRef("slack", fake.dm_channel(DEFAULT_USER), None)


async def test_a_slash_command_behind_its_dms_messages_answers_later_by_its_response_url(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    adapter = await make()
    bridge.gate.clear()  # the DM's message is still on its way into the "database"
    await fake.send_event(fake.dm_message("before the command"))
    await asyncio.wait_for(bridge.entered.wait(), 5)
    body = fake.slash_command_payload("/picobridge", "status")
    # Acknowledged while the message before it is held up, with nothing to say yet (the
    # adapter waits for it at most ACK_WITHIN; before, it waited for the gate: the bound
    # only turns that into a failure).
    assert await asyncio.wait_for(adapter.handle_command(body), 10) is None
    assert bridge.calls == 1 and fake.command_responses == []
    bridge.refusing = True  # ... and when it comes, the database refuses it
    bridge.gate.set()
    (response,) = await fake.wait_for(lambda: fake.command_responses)
    assert "try again" in response.text and response.response_type == "ephemeral"
    assert response.user == DEFAULT_USER
    assert bridge.submitted == []


async def test_slash_command_in_a_channel_explains_the_text_commands(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    adapter = await make()
    body = fake.slash_command_payload("/picobridge", "status")
    body["channel_id"] = DEFAULT_CHANNEL
    answer = await adapter.handle_command(body)
    assert answer is not None and bridge.submitted == []
    for command in listed_commands():
        assert f"`!{command.name}`" in answer


async def test_rejected_bot_token_is_fatal_without_the_token(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    fake.revoke(fake.bot_token)
    adapter = await make()
    assert len(bridge.fatals) == 1 and "slack.bot_token" in bridge.fatals[0]
    assert fake.bot_token not in bridge.fatals[0]
    assert fake.socket_connects == 0 and not adapter.connected()
    with pytest.raises(SlackAuthError) as info:
        await adapter.verify()
    assert "token_revoked" in str(info.value) and fake.bot_token not in str(info.value)


async def test_slack_down_at_start_is_retried_in_the_background(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slack_module, "RETRY_FIRST", 0.1)
    fake.fail_next("auth.test", 200, error="internal_error")
    adapter = await make()
    assert bridge.fatals == [] and not adapter.connected()
    await fake.wait_for_socket()
    await fake.send_event(fake.dm_message("made it"))
    await fake.wait_for(lambda: fake.acks)
    assert [m.text for m in bridge.submitted] == ["made it"]
    assert adapter.connected() and bridge.connections[-1] is True


async def test_verify_describes_the_bot(fake: FakeSlack, make: Callable[..., Any]) -> None:
    adapter = await make(start=False)
    text = await adapter.verify()
    assert "@picobridge (U0BOT)" in text and "Fake Team (T1)" in text and "Socket Mode" in text


async def test_stop_is_idempotent_and_reports_disconnect(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    adapter = await make()
    assert bridge.connections == [True]
    await adapter.stop()
    await adapter.stop()
    assert bridge.connections == [True, False]
    await fake.wait_for(lambda: fake.connection_count == 0)


async def test_bare_mention_asks_the_bridge_for_help(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    _, mention = await fake.send_mention("")
    await fake.wait_for_ack(mention["envelope_id"])
    assert [m.text for m in bridge.submitted] == ["/help"]


async def test_reactions_with_empty_names_are_not_made(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any], short_grace: None) -> None:
    adapter = await make(reaction_received="", reaction_done="", reaction_failed="")
    events = [fake.dm_message("done"), fake.dm_message("failed")]
    for event, outcome in zip(events, (Outcome.DONE, Outcome.FAILED), strict=True):
        await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
        chat = bridge.submitted[-1].chat
        ids = (event["ts"],)
        await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
        await adapter.clear_progress(chat, outcome)
    await adapter.stop()  # lets every pending reaction call finish first
    assert fake.calls_to("reactions.add") == fake.calls_to("reactions.remove") == []


async def test_without_a_done_reaction_the_received_one_is_just_removed(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any], short_grace: None) -> None:
    adapter = await make(reaction_done="")
    event = fake.dm_message("slow one")
    await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"]) == ["eyes"])
    chat = bridge.submitted[0].chat
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED,
                                                    message_ids=(event["ts"],)))
    await adapter.clear_progress(chat, Outcome.DONE)
    await fake.wait_for(lambda: fake.reactions_on(event["channel"], event["ts"]) == [])
    await adapter.stop()
    assert [c.params.get("name") for c in fake.calls_to("reactions.add")] == ["eyes"]
    assert [c.params.get("name") for c in fake.calls_to("reactions.remove")] == ["eyes"]


async def test_thread_history_is_read_only_when_it_can_be_and_only_for_allowed_people(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    top = fake.channel_message("the topic", user="U0SOMEONE")
    await fake.wait_for_ack((await fake.send_event(top))["envelope_id"])

    async def mention(text: str, user: str = DEFAULT_USER) -> None:
        event = fake.app_mention(text, user=user, thread_ts=top["ts"])
        await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])

    await mention("from a stranger", user="U0STRANGER")
    assert fake.calls_to("conversations.replies") == []  # nothing fetched for them
    fake.fail_next("conversations.replies", 200, error="missing_scope")
    await mention("no history scope")
    assert [m.text for m in bridge.submitted] == ["no history scope"]  # sent on without it
    assert len(fake.calls_to("conversations.replies")) == 1


async def test_thread_history_keeps_the_first_message_and_the_latest_ones(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context_module, "PAGE", 7)  # several pages for a 30-message thread
    await make()
    top = fake.channel_message("message 0", user="U0SOMEONE")
    await fake.wait_for_ack((await fake.send_event(top))["envelope_id"])
    for n in range(1, 30):
        event = fake.channel_message(f"message {n}", user="U0SOMEONE", thread_ts=top["ts"])
        await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    mention = fake.app_mention("sum it up", thread_ts=top["ts"])
    await fake.wait_for_ack((await fake.send_event(mention))["envelope_id"])
    [submitted] = bridge.submitted
    shown = [line.split(": ", 1)[1] for line in submitted.text.splitlines()
             if line.startswith("<@U0SOMEONE>: ")]
    assert shown == ["message 0"] + [f"message {n}" for n in range(10, 30)]
    assert submitted.text.endswith("sum it up")
    assert len(fake.calls_to("conversations.replies")) == 5  # 30 messages, 7 a page


async def test_messages_carry_when_they_were_written(
        fake: FakeSlack, bridge: StubBridge, make: Callable[..., Any]) -> None:
    await make()
    event = fake.dm_message("a message")
    await fake.wait_for_ack((await fake.send_event(event))["envelope_id"])
    [submitted] = bridge.submitted
    assert submitted.sent_at == float(event["ts"])  # so a late retry can be put in its place


def test_recent_ids_keep_at_least_the_last_size_and_forget_the_oldest() -> None:
    recent = Recent(size=16)
    recent.add(None)  # an event without an id is not remembered
    for n in range(100):
        recent.add(f"Ev{n}")
        if n == 90:
            recent.add("Ev0")  # seen again: the newest once more
    assert all(f"Ev{n}" in recent for n in range(84, 100))
    assert "Ev0" in recent and "Ev10" not in recent and "Ev60" not in recent
    assert len(recent._items) <= 17  # the bound plus its sixteenth
