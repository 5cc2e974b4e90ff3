"""Typing, streamed drafts and tool status against the fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from telegram import Bot

from picobridge.adapters.telegram import progress as telegram_progress
from picobridge.adapters.telegram.progress import ProgressDisplay, draft, visible
from picobridge.contract import (
    ChatRef,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
)
from tests.fakes.telegram import FakeTelegram, utf16_len

CHAT = ChatRef("telegram", "42")


def test_visible_and_draft_stay_within_one_message() -> None:
    assert visible("short") == "short"
    cut = visible("😀" * 3000)  # 6000 UTF-16 units
    assert utf16_len(cut) <= 4096 and cut.endswith(" …")
    long_markdown = "\n\n".join(f"**part {n}** " + "words " * 300 for n in range(10))
    shown = draft(long_markdown)
    assert utf16_len(shown.text) <= 4096 and shown.text.endswith(" …")
    assert shown.entities and shown.entities[0].type == "bold"


@pytest.fixture
async def rig(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FakeTelegram,
                                                                      ProgressDisplay]]:
    monkeypatch.setattr(telegram_progress, "TYPING_EVERY", 0.05)
    monkeypatch.setattr(telegram_progress, "TYPING_GRACE", 0.0)
    monkeypatch.setattr(telegram_progress, "EDIT_INTERVAL_PRIVATE", 0.05)
    async with FakeTelegram() as fake:
        bot: Bot = Bot(fake.token, base_url=fake.base_url)
        await bot.initialize()
        display = ProgressDisplay(bot, bot, stream=True, show_tools=True, typing_cap=30,
                                  scrub=str)
        try:
            yield fake, display
        finally:
            await display.close()
            await bot.shutdown()


async def test_typing_is_renewed_until_the_turn_ends(
        rig: tuple[FakeTelegram, ProgressDisplay]) -> None:
    fake, display = rig
    display.event(CHAT, ProgressEvent(ProgressKind.STARTED, message_ids=("5",)))
    await fake.wait_for(lambda: len(fake.chat_actions) >= 3, what="three typing actions")
    assert {(a.chat_id, a.action) for a in fake.chat_actions} == {(42, "typing")}
    typing = display._turns[CHAT.key].typing
    assert typing is not None
    display.clear(CHAT, Outcome.DONE)
    await asyncio.gather(typing, return_exceptions=True)
    assert typing.cancelled()


async def test_stream_edits_one_draft_that_the_answer_takes_over(
        rig: tuple[FakeTelegram, ProgressDisplay]) -> None:
    fake, display = rig
    display.event(CHAT, ProgressEvent(ProgressKind.STARTED, message_ids=("5",)))
    display.event(CHAT, ProgressEvent(ProgressKind.TEXT, text="Hello **wor"))
    await fake.wait_for(lambda: len(fake.sent_messages(42)) == 1, what="the draft")
    for word in ("ld**", " and ", "more ", "words"):
        display.event(CHAT, ProgressEvent(ProgressKind.TEXT, text=word))
    await fake.wait_for(lambda: fake.texts(42) == ["Hello world and more words"],
                        what="the draft to catch up")
    (message,) = fake.sent_messages(42)
    assert message.params.get("reply_parameters", {}).get("message_id") == 5
    assert {"type": "bold", "offset": 6, "length": 5} in message.entities
    display.clear(CHAT, Outcome.DONE)
    answer = OutgoingReply("Hello **world** and more words", ReplyKind.ANSWER, reply_to="5",
                           outbox_id=1)
    assert await display.take_draft(CHAT, answer) == message.message_id
    # A retry of the same reply replaces the same draft; any other reply has none.
    assert await display.take_draft(CHAT, answer) == message.message_id
    assert await display.take_draft(CHAT, replace(answer, outbox_id=2)) is None
    # Throttled: the four deltas came while the first send's interval ran, and made one edit
    # (the latest text), not four.
    assert len(fake.calls_to("editMessageText")) == 1


async def test_requeued_turn_removes_its_draft_and_tool_status(
        rig: tuple[FakeTelegram, ProgressDisplay]) -> None:
    fake, display = rig
    display.event(CHAT, ProgressEvent(ProgressKind.TOOL_START, tool="list_dir"))
    display.event(CHAT, ProgressEvent(ProgressKind.TEXT, text="half an answer"))
    await fake.wait_for(lambda: len(fake.sent_messages(42)) == 2, what="status and draft")
    assert any(t.startswith("🔧 list_dir") for t in fake.texts(42))
    display.clear(CHAT, Outcome.REQUEUED)
    await fake.wait_for(lambda: fake.sent_messages(42) == [], what="both deleted")
    assert await display.take_draft(CHAT, OutgoingReply("x", ReplyKind.ANSWER)) is None


async def test_each_answer_takes_its_own_draft_in_turn_order(
        rig: tuple[FakeTelegram, ProgressDisplay]) -> None:
    fake, display = rig
    drafts = []
    for turn, ids in enumerate((("5",), ("6", "7"))):
        display.event(CHAT, ProgressEvent(ProgressKind.STARTED, message_ids=ids))
        display.event(CHAT, ProgressEvent(ProgressKind.TEXT, text=f"answer {turn} so f",
                                          message_ids=ids))
        await fake.wait_for_messages(42, count=turn + 1)
        drafts.append(fake.sent_messages(42)[-1].message_id)
        display.clear(CHAT, Outcome.DONE)
    # Both turns ended before either answer went out: each answer finds its own draft.
    first = OutgoingReply("answer 0", ReplyKind.ANSWER, reply_to="5", outbox_id=10)
    second = OutgoingReply("answer 1", ReplyKind.ANSWER, reply_to="7", outbox_id=11)
    assert await display.take_draft(CHAT, first) == drafts[0]
    assert await display.take_draft(CHAT, second) == drafts[1]


async def test_a_draft_whose_answer_never_comes_is_taken_down(
        rig: tuple[FakeTelegram, ProgressDisplay]) -> None:
    fake, display = rig
    for turn, ids in enumerate((("5",), ("6",))):
        display.event(CHAT, ProgressEvent(ProgressKind.TEXT, text=f"draft {turn}",
                                          message_ids=ids))
        await fake.wait_for_messages(42, count=turn + 1)
        display.clear(CHAT, Outcome.DONE)
    stale, kept = fake.sent_messages(42)
    # The answer of the first turn was never stored (it comes after a restart, anew).
    later = OutgoingReply("answer 1", ReplyKind.ANSWER, reply_to="6", outbox_id=12)
    assert await display.take_draft(CHAT, later) == kept.message_id
    await fake.wait_for(lambda: fake.sent_messages(42) == [kept], what="the stale draft gone")
    assert stale.deleted
