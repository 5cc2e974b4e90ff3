"""Streamed progress fed a very long stream of tiny deltas at once, on both platforms: the
draft shows the start of the answer in one message, marked as going on, and the rest of the
stream costs no further edit (only what a draft can show is kept)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot

import picobridge.adapters.slack.progress as slack_progress
import picobridge.adapters.telegram.progress as telegram_progress
from picobridge.adapters.slack.adapter import SlackAdapter
from picobridge.adapters.telegram.progress import ProgressDisplay
from picobridge.config.loader import settings_of
from picobridge.contract import (
    ChatRef,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
)
from tests.fakes.slack import DEFAULT_CHANNEL, FakeSlack
from tests.fakes.telegram import FakeTelegram, utf16_len
from tests.unit.test_slack_adapter import StubBridge

TEXT = "".join(f"word{n} " for n in range(20_000))  # about 150,000 characters


@pytest.fixture
async def telegram(monkeypatch: pytest.MonkeyPatch
                   ) -> AsyncIterator[tuple[FakeTelegram, ProgressDisplay]]:
    monkeypatch.setattr(telegram_progress, "EDIT_INTERVAL_PRIVATE", 0.05)
    async with FakeTelegram() as fake:
        bot: Bot = Bot(fake.token, base_url=fake.base_url)
        await bot.initialize()
        display = ProgressDisplay(bot, bot, stream=True, show_tools=False, typing_cap=30,
                                  scrub=str)
        try:
            yield fake, display
        finally:
            await display.close()
            await bot.shutdown()


@pytest.fixture
async def slack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> AsyncIterator[tuple[FakeSlack, SlackAdapter]]:
    monkeypatch.setattr(slack_progress, "STREAM_INTERVAL", 0.05)
    async with FakeSlack() as fake:
        # The `slack` section is a field only of the model built at run time (settings_model);
        # type checkers see the core model, hence the untyped keywords.
        sections: dict[str, Any] = {"slack": {
            "bot_token": fake.bot_token, "app_token": fake.app_token,
            "base_url": fake.api_url, "stream": True}}
        settings = settings_of(state_dir=tmp_path, **sections)
        adapter = SlackAdapter(settings)
        await adapter.start(StubBridge())
        try:
            yield fake, adapter
        finally:
            await adapter.stop()


async def test_telegram_draft_of_a_huge_stream(
        telegram: tuple[FakeTelegram, ProgressDisplay]) -> None:
    fake, display = telegram
    chat = ChatRef("telegram", "42")
    display.event(chat, ProgressEvent(ProgressKind.STARTED, message_ids=("5",)))
    for char in TEXT:  # all before the draft's task first runs: one render sees them all
        display.event(chat, ProgressEvent(ProgressKind.TEXT, text=char))
    (draft,) = await fake.wait_for_messages(42)
    assert draft.text is not None and draft.text.endswith(" …")
    assert TEXT.startswith(draft.text.removesuffix(" …"))
    assert utf16_len(draft.text) <= 4096
    display.clear(chat, Outcome.DONE)
    answer = OutgoingReply(TEXT, ReplyKind.ANSWER, reply_to="5", outbox_id=1)
    assert await display.take_draft(chat, answer) == draft.message_id
    assert [c for c in fake.calls if c.method == "editMessageText"] == []


async def test_slack_stream_preview_of_a_huge_stream(
        slack: tuple[FakeSlack, SlackAdapter]) -> None:
    fake, adapter = slack
    fake.register_channel(DEFAULT_CHANNEL)
    chat = ChatRef("slack", DEFAULT_CHANNEL, "1700000000.000500")
    await adapter.show_progress(chat, ProgressEvent(ProgressKind.STARTED))
    for char in TEXT:
        await adapter.show_progress(chat, ProgressEvent(ProgressKind.TEXT, char))
    streamed = await fake.wait_for_message(DEFAULT_CHANNEL, chat.thread_id)
    assert streamed.text.endswith("\n…")
    assert TEXT.startswith(streamed.text.removesuffix("\n…"))
    assert len(streamed.text) <= slack_progress.STREAM_PREVIEW + 2
    await adapter.clear_progress(chat, Outcome.DONE)
    await adapter.send_reply(chat, OutgoingReply("the answer", ReplyKind.ANSWER))
    assert [m.text for m in fake.posted_messages(DEFAULT_CHANNEL)] == ["the answer"]
    assert len(fake.calls_to("chat.update")) == 1  # the answer's; the preview never changed
