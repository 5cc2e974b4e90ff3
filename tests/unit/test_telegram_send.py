"""Reply delivery against the fake Bot API: plans, partial retries, error mapping, fallbacks."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegram import Bot

from picobridge.adapters.common.partlog import PartLog
from picobridge.adapters.telegram.send import EMPTY_REPLY, FileStep, Sender, TextStep, plan
from picobridge.contract import ChatRef, DeliveryError, OutgoingReply, ReplyKind
from tests.fakes.telegram import FakeTelegram
from tests.unit.telegram_memory import MemoryBridge

REPO = Path(__file__).resolve().parents[2]

CHAT = ChatRef("telegram", "42")


def para(n: int, size: int = 1500) -> str:
    return f"**Paragraph {n}** " + ("lorem ipsum " * (size // 12))


def test_plan_short_long_and_empty() -> None:
    (only,) = plan("hello **world**", 4)
    assert isinstance(only, TextStep) and only.chunk.text == "hello world"
    long_text = "\n\n".join(para(n) for n in range(12))
    steps = plan(long_text, 4)
    assert [type(s) for s in steps] == [TextStep, FileStep]
    head, document = steps
    assert isinstance(head, TextStep) and "attached file" in head.chunk.text
    assert head.chunk.text.startswith("Paragraph 0")
    assert isinstance(document, FileStep) and document.markdown == long_text
    assert len(plan(long_text, 20)) > 4
    (empty,) = plan("  \n ", 4)
    assert isinstance(empty, TextStep) and empty.chunk.text == EMPTY_REPLY


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def bridge() -> MemoryBridge:
    return MemoryBridge()


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    bot: Bot = Bot(fake.token, base_url=fake.base_url,
                              base_file_url=fake.base_file_url)
    await bot.initialize()
    yield bot
    await bot.shutdown()


def new_sender(bot: Bot, bridge: MemoryBridge, fake: FakeTelegram) -> Sender:
    """A Sender as a (re)started daemon builds it: nothing in memory, the store's cursors."""
    return Sender(bot, PartLog(bridge, "telegram"), max_chunks=4,
                  scrub=lambda s: s.replace(fake.token, "[token]"), on_revoked=lambda: None)


@pytest.fixture
def sender(bot: Bot, bridge: MemoryBridge, fake: FakeTelegram) -> Sender:
    return new_sender(bot, bridge, fake)


async def test_retry_after_a_429_resends_only_missing_chunks(fake: FakeTelegram,
                                                             sender: Sender) -> None:
    text = "\n\n".join(para(n) for n in range(6))  # three chunks
    reply = OutgoingReply(text, ReplyKind.ANSWER, reply_to="7", outbox_id=3)
    fake.set_flood(every=2, retry_after=3)
    with pytest.raises(DeliveryError) as first:
        await sender.send(CHAT, reply)
    assert first.value.retry_after == 3 and not first.value.permanent
    fake.set_flood(0)
    await sender.send(CHAT, reply)
    texts = fake.texts(42)
    assert len(texts) == 3 and len(set(texts)) == 3
    assert texts[0].startswith("Paragraph 0") and texts[2].startswith("Paragraph 4")
    # The quote belongs to the first message only, also when the rest came on a retry.
    quoted = [m.params.get("reply_parameters") for m in fake.sent_messages(42)]
    assert quoted[0] == {"message_id": 7, "allow_sending_without_reply": True}
    assert quoted[1:] == [None, None]


async def test_a_restart_resumes_after_the_last_part_that_arrived(
        fake: FakeTelegram, bot: Bot, bridge: MemoryBridge) -> None:
    text = "\n\n".join(para(n) for n in range(6))  # three chunks
    reply = OutgoingReply(text, ReplyKind.ANSWER, reply_to="7", outbox_id=4)
    fake.fail_next("sendMessage", 502)  # the first part is refused: nothing to record
    with pytest.raises(DeliveryError):
        await new_sender(bot, bridge, fake).send(CHAT, reply)
    assert "telegram.parts.4" not in bridge.cursors
    fake.set_flood(every=2, retry_after=3)  # the first part goes, the second is refused
    with pytest.raises(DeliveryError):
        await new_sender(bot, bridge, fake).send(CHAT, reply)
    fake.set_flood(0)
    assert json.loads(bridge.cursors["telegram.parts.4"])["done"] == ["0"]
    await new_sender(bot, bridge, fake).send(CHAT, reply)  # as after a restart
    texts = fake.texts(42)
    assert [t[:12] for t in texts] == ["Paragraph 0 ", "Paragraph 2 ", "Paragraph 4 "]
    assert bridge.cursors["telegram.parts.4"] == ""


async def test_progress_of_another_split_is_not_trusted(
        fake: FakeTelegram, sender: Sender, bridge: MemoryBridge) -> None:
    text = "\n\n".join(para(n) for n in range(6))
    # Recorded for a reply that was split differently (another setting, another version).
    bridge.cursors["telegram.parts.5"] = json.dumps({"plan": "0123456789abcdef",
                                                     "done": ["0", "1"]})
    await sender.send(CHAT, OutgoingReply(text, ReplyKind.ANSWER, outbox_id=5))
    assert len(fake.texts(42)) == 3  # sent whole rather than with parts missing
    assert bridge.cursors["telegram.parts.5"] == ""


async def test_error_mapping(fake: FakeTelegram, sender: Sender) -> None:
    reply = OutgoingReply("hi", ReplyKind.ANSWER)
    fake.fail_next("sendMessage", 502)
    with pytest.raises(DeliveryError) as gateway:
        await sender.send(CHAT, reply)
    assert not gateway.value.permanent and gateway.value.retry_after is None
    fake.fail_next("sendMessage", 400, error="Bad Request: message thread not found")
    with pytest.raises(DeliveryError) as refused:
        await sender.send(CHAT, reply)
    assert refused.value.permanent and "thread not found" in str(refused.value)
    fake.block_chat(42)
    with pytest.raises(DeliveryError) as blocked:
        await sender.send(CHAT, reply)
    assert blocked.value.permanent
    assert fake.token not in str(blocked.value)


async def test_entity_refusal_falls_back_to_plain_text(fake: FakeTelegram,
                                                       sender: Sender) -> None:
    fake.fail_next("sendMessage", 400, error="Bad Request: can't parse entities: x")
    await sender.send(CHAT, OutgoingReply("**bold** and `code`", ReplyKind.ANSWER))
    (message,) = fake.sent_messages(42)
    assert message.text == "bold and code" and message.entities == []


async def test_group_migrated_to_supergroup(fake: FakeTelegram, sender: Sender) -> None:
    fake.fail_next("sendMessage", 400, error="Bad Request: group chat was upgraded",
                   extra={"migrate_to_chat_id": -1001234})
    await sender.send(ChatRef("telegram", "-55"), OutgoingReply("moved", ReplyKind.ANSWER))
    assert fake.texts(-1001234) == ["moved"]


async def test_streamed_draft_becomes_the_answer(fake: FakeTelegram, sender: Sender) -> None:
    draft = await sender._bot.send_message(42, "partial answ")
    await sender.send(CHAT, OutgoingReply("partial **answer**", ReplyKind.ANSWER),
                      edit=draft.message_id)
    (message,) = fake.sent_messages(42)
    assert message.text == "partial answer" and message.edits == ["partial answ"]
    assert message.entities == [{"type": "bold", "offset": 8, "length": 6}]


async def test_long_reply_goes_as_a_file_in_the_topic(fake: FakeTelegram,
                                                      sender: Sender) -> None:
    text = "\n\n".join(para(n) for n in range(12))
    await sender.send(ChatRef("telegram", "-100900", "5"), OutgoingReply(text, ReplyKind.ANSWER))
    head, document = fake.sent_messages(-100900)
    assert head.message_thread_id == 5 and document.message_thread_id == 5
    assert document.file is not None and document.file.data.decode() == text


async def test_the_daemon_does_not_log_ptbs_retry_after_deprecation() -> None:
    # Outside pytest's warning machinery, as in the daemon: a 429 from Telegram must not put
    # PTB's deprecation warning in the operator's log, and the wait is still read right.
    code = ("import warnings; warnings.simplefilter('default')\n"
            "import picobridge.adapters.telegram.errors as e\n"
            "from telegram.error import RetryAfter\n"
            "print(e.retry_seconds(RetryAfter(7)))\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=str(REPO),
        env={k: v for k, v in os.environ.items() if k != "PTB_TIMEDELTA"})
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "7.0"
    assert "Warning" not in err.decode()
