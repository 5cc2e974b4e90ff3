"""Questions as inline keyboards and their clicks (adapters/telegram/buttons.py), against the
fake Bot API: the keyboard's layout, callback queries that cannot be read, a click held
through a storage outage, questions whose message cannot take the answer's line, and
questions closed other than by a click (the message that carries the keyboard, found when it
is sent, loses it)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from telegram import Bot, CallbackQuery, InlineKeyboardMarkup, Message

from picobridge.adapters.common.buttons import (
    CLOSED,
    CLOSED_LINE,
    EXPIRED_LINE,
    Asked,
    QuestionMessages,
)
from picobridge.adapters.common.partlog import PartLog
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.telegram.buttons import Clicks, Closings, keyboard
from picobridge.adapters.telegram.parse import Malformed, parse_update
from picobridge.adapters.telegram.send import Sender
from picobridge.adapters.telegram.storage import StorageWait
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
from tests.fakes.telegram import FakeTelegram
from tests.unit.telegram_memory import MemoryBridge

CHAT_ID = 42
CONFIRM = Dialog("ab12cd341", DialogKind.CONFIRM, "Deploy now?")
PRIVATE = "the user's secret words"


def rows(markup: InlineKeyboardMarkup | None) -> list[list[tuple[str, str]]]:
    assert markup is not None
    return [[(b.text, str(b.callback_data)) for b in row] for row in markup.inline_keyboard]


def test_keyboards_of_each_kind_of_question() -> None:
    asked = Asked()
    assert rows(keyboard(CONFIRM, asked)) == [
        [("Yes", "d:ab12cd341:y"), ("No", "d:ab12cd341:n")], [("Cancel", "d:ab12cd341:c")]]
    long = "a very long option " * 5
    select = Dialog("ab12cd342", DialogKind.SELECT, "Pick", options=("one", long))
    shown = rows(keyboard(select, asked))
    assert [len(r) for r in shown] == [1, 1, 1]
    assert shown[1][0][0].endswith("…") and len(shown[1][0][0]) == 40
    assert asked.answer("ab12cd342", "1") == DialogAnswer(value=long)  # the full option
    assert keyboard(Dialog("ab12cd343", DialogKind.INPUT, "Name?"), asked) is None
    assert keyboard(None, asked) is None


def query(data: object = "d:ab12cd341:y", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "77", "chat_instance": "5", "data": data,
        "from": {"id": CHAT_ID, "is_bot": False, "first_name": "A"},
        "message": {"message_id": 3, "date": 1, "text": PRIVATE,
                    "chat": {"id": CHAT_ID, "type": "private"}}}
    base.update(fields)
    return {"update_id": 1, "callback_query": {k: v for k, v in base.items() if v is not None}}


@pytest.mark.parametrize("raw", [
    {"update_id": 1, "callback_query": PRIVATE},
    query(id=77),
    query(id=""),
    query(**{"from": {"id": "42", "is_bot": False, "first_name": "A"}}),
    query(data=7391),
    query(message={"message_id": 3, "date": 1, "text": PRIVATE, "chat": {"id": "x"}}),
    query(message={"message_id": 3, "date": 0, "chat": {"id": "42", "type": "private"}}),
    query(message={"message_id": 3, "date": 1, "text": 5,
                   "chat": {"id": CHAT_ID, "type": "private"}}),
    query(chat_instance=None),
])
def test_unreadable_callback_queries_are_refused_without_quoting_them(raw: object) -> None:
    with pytest.raises(Malformed) as caught:
        parse_update(raw, Bot("123:abc"))
    assert PRIVATE not in str(caught.value) and "7391" not in str(caught.value)


def test_readable_callback_queries() -> None:
    bot = Bot("123:abc")
    update = parse_update(query(), bot)
    assert update.callback_query is not None and update.callback_query.data == "d:ab12cd341:y"
    # A message older than 48 hours comes as inaccessible (date 0): still a readable click.
    old = parse_update(query(message={"message_id": 3, "date": 0,
                                      "chat": {"id": CHAT_ID, "type": "private"}}), bot)
    assert old.callback_query is not None and old.callback_query.message is not None
    assert not old.callback_query.message.is_accessible
    assert parse_update(query(message=None), bot).callback_query is not None


@dataclass
class Bridge(MemoryBridge):
    """The in-memory BridgeLink, with a store that refuses `outages` times and clicks that
    count (what a click uses of BridgeLink)."""

    outages: int = 0
    answered: list[tuple[str, ChatRef, DialogAnswer]] = field(default_factory=list)

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        if self.outages:
            self.outages -= 1
            raise StorageUnavailable("database is locked")
        return True

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        self.answered.append((dialog_id, chat, answer))
        return answer.describe()


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    bot: Bot = Bot(fake.token, base_url=fake.base_url,
                              base_file_url=fake.base_file_url)
    await bot.initialize()
    yield bot
    await bot.shutdown()


async def asked_and_clicked(fake: FakeTelegram, bot: Bot, asked: Asked, text: str,
                            button: str) -> tuple[int, CallbackQuery]:
    sent = await bot.send_message(CHAT_ID, text, reply_markup=keyboard(CONFIRM, asked))
    update = fake.press_button(CHAT_ID, sent.message_id, CHAT_ID, text=button)
    parsed = parse_update(update, bot).callback_query
    assert parsed is not None
    return sent.message_id, parsed


async def test_a_click_is_held_through_a_storage_outage(
        fake: FakeTelegram, bot: Bot, caplog: pytest.LogCaptureFixture) -> None:
    asked, bridge = Asked(), Bridge(outages=3)
    message_id, clicked = await asked_and_clicked(fake, bot, asked, "Deploy now?", "No")
    clicks = Clicks(bot, bridge, asked, StorageWait(hold=True, first=0.01, cap=0.02), str)
    with caplog.at_level(logging.WARNING, logger="picobridge.telegram"):
        await clicks.handle(clicked)
    assert bridge.answered == [(CONFIRM.id, ChatRef("telegram", str(CHAT_ID)),
                                DialogAnswer(confirmed=False))]
    assert fake.callback_answers[clicked.id]["text"] == "✓ Answer: no"
    shown = fake.message(CHAT_ID, message_id)
    assert shown is not None and shown["text"] == "Deploy now?\n\n✓ Answer: no"
    assert "reply_markup" not in shown
    assert len([r for r in caplog.records if "cannot store" in r.getMessage()]) == 1


async def test_a_webhook_click_in_an_outage_is_refused_unanswered(
        fake: FakeTelegram, bot: Bot) -> None:
    asked, bridge = Asked(), Bridge(outages=1)
    _, clicked = await asked_and_clicked(fake, bot, asked, "Deploy now?", "Yes")
    clicks = Clicks(bot, bridge, asked, StorageWait(hold=False), str)
    with pytest.raises(StorageUnavailable):
        await clicks.handle(clicked)
    # Not answered: Telegram sends the update again (503) and it counts then.
    assert fake.callback_answers == {} and bridge.answered == []
    await clicks.handle(clicked)
    assert fake.callback_answers[clicked.id]["text"] == "✓ Answer: yes"


async def test_a_question_too_long_for_its_answer_line_only_loses_its_keyboard(
        fake: FakeTelegram, bot: Bot) -> None:
    asked = Asked()
    text = "x" * 4090
    message_id, clicked = await asked_and_clicked(fake, bot, asked, text, "Yes")
    await Clicks(bot, Bridge(), asked, StorageWait(hold=True), str).handle(clicked)
    shown = fake.message(CHAT_ID, message_id)
    assert shown is not None and shown["text"] == text and "reply_markup" not in shown
    assert [c.method for c in fake.calls if c.method.startswith("edit")] == [
        "editMessageReplyMarkup"]


async def test_a_click_on_an_inaccessible_message_is_told_closed(
        fake: FakeTelegram, bot: Bot) -> None:
    asked = Asked()
    asked.remember(CONFIRM)
    sent = await bot.send_message(CHAT_ID, "old question")
    update = fake.callback_query_update(
        CHAT_ID, sent.message_id, CHAT_ID, "d:ab12cd341:y",
        message={"message_id": sent.message_id, "date": 0,
                 "chat": {"id": CHAT_ID, "type": "private"}})
    clicked = parse_update(update, bot).callback_query
    assert clicked is not None
    bridge = Bridge()
    await Clicks(bot, bridge, asked, StorageWait(hold=True), str).handle(clicked)
    assert fake.callback_answers[clicked.id]["text"] == CLOSED
    assert bridge.answered == []


async def test_telegram_failing_after_the_answer_counted_is_only_logged(
        fake: FakeTelegram, bot: Bot, caplog: pytest.LogCaptureFixture) -> None:
    asked, bridge = Asked(), Bridge()
    message_id, clicked = await asked_and_clicked(fake, bot, asked, "Deploy now?", "Yes")
    fake.fail_next("answerCallbackQuery", 400, error="Bad Request: query is too old")
    fake.fail_next("editMessageText", 400, error="Bad Request: message can't be edited")
    with caplog.at_level(logging.INFO, logger="picobridge.telegram"):
        await Clicks(bot, bridge, asked, StorageWait(hold=True), str).handle(clicked)
    assert len(bridge.answered) == 1  # counted once; nothing raised, nothing retried
    assert "keeps its buttons" in caplog.text
    assert fake.message(CHAT_ID, message_id) is not None


def sender(bot: Bot) -> Sender:
    return Sender(bot, PartLog(MemoryBridge(), "telegram"), max_chunks=4, scrub=str,
                  on_revoked=lambda: None)


async def send_question(bot: Bot, text: str, outbox_id: int = 1) -> Message:
    markup = keyboard(CONFIRM, Asked())
    carrier = await sender(bot).send(ChatRef("telegram", str(CHAT_ID)), OutgoingReply(
        text, ReplyKind.QUESTION, outbox_id=outbox_id, dialog=CONFIRM), markup=markup)
    assert carrier is not None and carrier.reply_markup == markup
    return carrier


async def test_the_send_hands_back_the_message_that_carries_the_keyboard(
        fake: FakeTelegram, bot: Bot) -> None:
    carrier = await send_question(bot, "**Deploy now?**")
    (message,) = fake.sent_messages(CHAT_ID)
    assert carrier.message_id == message.message_id and message.reply_markup is not None
    # Several parts: the keyboard, and so the message handed back, is the last one's.
    long = "\n\n".join(f"paragraph {n} " + "y" * 3000 for n in range(3))
    carrier = await send_question(bot, long, outbox_id=2)
    *before, last = fake.sent_messages(CHAT_ID)[1:]
    assert carrier.message_id == last.message_id and len(before) == 2
    assert all(m.reply_markup is None for m in before)
    # Sent as plain text after Telegram refused the formatting: the last piece.
    fake.fail_next("sendMessage", 400, error="Bad Request: can't parse entities: x")
    carrier = await send_question(bot, "**plain** then", outbox_id=3)
    assert carrier.message_id == fake.sent_messages(CHAT_ID)[-1].message_id
    # An answer has no keyboard: nothing to hand back.
    assert await sender(bot).send(ChatRef("telegram", str(CHAT_ID)),
                                  OutgoingReply("done", ReplyKind.ANSWER)) is None


async def test_a_question_closed_otherwise_shows_how_and_loses_its_keyboard(
        fake: FakeTelegram, bot: Bot) -> None:
    tasks = TaskSet(logging.getLogger("test"))
    closings = Closings(QuestionMessages(), tasks, str)
    carrier = await send_question(bot, "**Deploy now?**")
    closings.sent(bot, CONFIRM.id, carrier)
    await closings.closed(bot, DialogClosed(CONFIRM.id, DialogEnd.EXPIRED))
    shown = fake.message(CHAT_ID, carrier.message_id)
    assert shown is not None and "reply_markup" not in shown
    assert shown["text"] == f"Deploy now?\n\n{EXPIRED_LINE}"
    assert shown["entities"] == [{"type": "bold", "offset": 0, "length": 11}]
    # Closed once: a second closing finds nothing left to change.
    edits = len(fake.calls_to("editMessageText"))
    await closings.closed(bot, DialogClosed(CONFIRM.id, DialogEnd.CLOSED))
    assert len(fake.calls_to("editMessageText")) == edits
    assert len(tasks) == 0
    await tasks.close()


async def test_a_question_closed_before_it_was_sent_is_changed_once_it_is(
        fake: FakeTelegram, bot: Bot) -> None:
    tasks = TaskSet(logging.getLogger("test"))
    closings = Closings(QuestionMessages(), tasks, str)
    typed = DialogClosed(CONFIRM.id, DialogEnd.ANSWERED, DialogAnswer(confirmed=True))
    await closings.closed(bot, typed)
    assert fake.calls_to("editMessageText") == []
    carrier = await send_question(bot, "Deploy now?")
    closings.sent(bot, CONFIRM.id, carrier)
    await tasks.wait(10.0)
    shown = fake.message(CHAT_ID, carrier.message_id)
    assert shown is not None and shown["text"] == "Deploy now?\n\n✓ Answer: yes"
    assert "reply_markup" not in shown
    await tasks.close()


async def test_a_question_sent_as_a_file_only_loses_its_keyboard(
        fake: FakeTelegram, bot: Bot) -> None:
    closings = Closings(QuestionMessages(), TaskSet(logging.getLogger("test")), str)
    huge = "\n\n".join(f"paragraph {n} " + "z" * 3000 for n in range(8))
    carrier = await send_question(bot, huge)
    assert carrier.document is not None
    closings.sent(bot, CONFIRM.id, carrier)
    await closings.closed(bot, DialogClosed(CONFIRM.id, DialogEnd.CLOSED))
    shown = fake.message(CHAT_ID, carrier.message_id)
    assert shown is not None and "reply_markup" not in shown and "document" in shown
    assert [c.method for c in fake.calls if c.method.startswith("edit")] == [
        "editMessageReplyMarkup"]
    assert CLOSED_LINE not in str(shown)


async def test_a_closed_question_telegram_will_not_change_is_only_logged(
        fake: FakeTelegram, bot: Bot, caplog: pytest.LogCaptureFixture) -> None:
    closings = Closings(QuestionMessages(), TaskSet(logging.getLogger("test")), str)
    carrier = await send_question(bot, f"Deploy now? {PRIVATE}")
    closings.sent(bot, CONFIRM.id, carrier)
    await bot.delete_message(CHAT_ID, carrier.message_id)  # the person deleted it
    with caplog.at_level(logging.INFO, logger="picobridge.telegram"):
        await closings.closed(bot, DialogClosed(CONFIRM.id, DialogEnd.EXPIRED))
    assert f"closed question {carrier.message_id} keeps its buttons" in caplog.text
    assert PRIVATE not in caplog.text
    fake.fail_next("editMessageText", 429, retry_after=60)
    carrier = await send_question(bot, "Deploy now?", outbox_id=2)
    closings.sent(bot, CONFIRM.id, carrier)
    await closings.closed(bot, DialogClosed(CONFIRM.id, DialogEnd.EXPIRED))  # no wait, no raise
    assert fake.calls_to("editMessageText")[-1].status == 429


async def test_a_short_flood_wait_on_the_closing_edit_is_waited_out_once(
        fake: FakeTelegram, bot: Bot) -> None:
    closings = Closings(QuestionMessages(), TaskSet(logging.getLogger("test")), str)
    carrier = await send_question(bot, "Deploy now?")
    closings.sent(bot, CONFIRM.id, carrier)
    fake.fail_next("editMessageText", 429, retry_after=1)
    await closings.closed(bot, DialogClosed(CONFIRM.id, DialogEnd.EXPIRED))
    assert [c.status for c in fake.calls_to("editMessageText")] == [429, 200]
    shown = fake.message(CHAT_ID, carrier.message_id)
    assert shown is not None and "reply_markup" not in shown
    assert EXPIRED_LINE in str(shown)
