"""The fake Telegram's inline keyboards: strict where the Bot API is (callback data size,
button shape, answering a query once, edits and the keyboard), and clicks only on buttons
that are on screen."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import telegram
from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest

from tests.fakes.telegram import FakeTelegram

CHAT = 42


def markup(*rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"inline_keyboard": list(rows)}


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[telegram.Bot]:
    bot = telegram.Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
    await bot.initialize()
    yield bot
    await bot.shutdown()


async def test_a_keyboard_is_kept_on_the_message(fake: FakeTelegram, bot: telegram.Bot) -> None:
    keys = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="d:1:y"),
                                  InlineKeyboardButton("No", callback_data="d:1:n")]])
    sent = await bot.send_message(CHAT, "Deploy?", reply_markup=keys)
    (message,) = fake.sent_messages(CHAT)
    assert [[b["text"] for b in row] for row in message.buttons] == [["Yes", "No"]]
    assert sent.reply_markup is not None  # the answer carries it, as Telegram's does


@pytest.mark.parametrize(("keys", "error"), [
    (markup([{"text": "x", "callback_data": "d" * 65}]), "BUTTON_DATA_INVALID"),
    (markup([{"text": "x", "callback_data": ""}]), "BUTTON_DATA_INVALID"),
    (markup([{"text": "x", "callback_data": "é" * 33}]), "BUTTON_DATA_INVALID"),  # 66 bytes
    (markup([{"text": "", "callback_data": "d"}]), "BUTTON_TEXT_EMPTY"),
    (markup([{"text": "x"}]), "text buttons are unallowed"),
    (markup([{"text": "x", "callback_data": "d", "url": "https://e.com"}]), "more than one"),
    (markup(*[[{"text": "x", "callback_data": str(n)}] for n in range(101)]), "too long"),
    ({"inline_keyboard": [{"text": "x"}]}, "Array of Arrays"),
    ({"keyboard": []}, "can't parse"),
])
async def test_keyboards_the_bot_api_refuses(fake: FakeTelegram, bot: telegram.Bot,
                                             keys: dict[str, Any], error: str) -> None:
    with pytest.raises(BadRequest) as caught:
        await bot._post("sendMessage", {"chat_id": CHAT, "text": "t", "reply_markup": keys})
    # python-telegram-bot changes the case of Telegram's descriptions.
    assert error.lower() in caught.value.message.lower()
    assert fake.sent_messages(CHAT) == []


async def test_64_bytes_of_data_and_100_buttons_are_fine(fake: FakeTelegram,
                                                         bot: telegram.Bot) -> None:
    keys = markup(*[[{"text": "x", "callback_data": "é" * 32}] for _ in range(100)])
    await bot._post("sendMessage", {"chat_id": CHAT, "text": "t", "reply_markup": keys})
    assert len(fake.sent_messages(CHAT)[0].buttons) == 100


async def test_pressing_a_button_and_answering_the_query(fake: FakeTelegram,
                                                        bot: telegram.Bot) -> None:
    keys = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="d:1:y")]])
    sent = await bot.send_message(CHAT, "Deploy?", reply_markup=keys)
    with pytest.raises(LookupError):
        fake.press_button(CHAT, sent.message_id, CHAT, text="Maybe")
    update = fake.press_button(CHAT, sent.message_id, 7, text="Yes")
    query = update["callback_query"]
    assert query["data"] == "d:1:y" and query["from"]["id"] == 7
    assert query["message"]["message_id"] == sent.message_id
    assert query["message"]["reply_markup"] == markup([{"text": "Yes",
                                                         "callback_data": "d:1:y"}])
    (polled,) = await bot.get_updates(timeout=0, allowed_updates=["callback_query"])
    assert polled.callback_query is not None and polled.callback_query.data == "d:1:y"

    with pytest.raises(BadRequest, match=r"(?i)MESSAGE_TOO_LONG"):
        await bot.answer_callback_query(query["id"], text="x" * 201)
    assert await bot.answer_callback_query(query["id"], text="x" * 200)
    assert fake.callback_answers[query["id"]]["text"] == "x" * 200
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):  # once only
        await bot.answer_callback_query(query["id"])
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):  # only queries Telegram sent
        await bot.answer_callback_query("12345")


async def test_callback_queries_are_only_delivered_when_asked_for(
        fake: FakeTelegram, bot: telegram.Bot) -> None:
    sent = await bot.send_message(CHAT, "q", reply_markup=InlineKeyboardMarkup(
        [[InlineKeyboardButton("Yes", callback_data="d:1:y")]]))
    fake.press_button(CHAT, sent.message_id, CHAT, text="Yes")
    assert await bot.get_updates(timeout=0, allowed_updates=["message"]) == ()


async def test_edits_and_the_keyboard(fake: FakeTelegram, bot: telegram.Bot) -> None:
    keys = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="d:1:y")]])
    sent = await bot.send_message(CHAT, "Deploy?", reply_markup=keys)
    (message,) = fake.sent_messages(CHAT)
    # Editing the text with the same keyboard keeps it; without one takes it away.
    await bot.edit_message_text("Deploy now?", chat_id=CHAT, message_id=sent.message_id,
                                reply_markup=keys)
    assert message.reply_markup is not None
    with pytest.raises(BadRequest, match=r"(?i)not modified"):
        await bot.edit_message_text("Deploy now?", chat_id=CHAT, message_id=sent.message_id,
                                    reply_markup=keys)
    await bot.edit_message_text("Deploy now? yes", chat_id=CHAT, message_id=sent.message_id)
    assert message.reply_markup is None and message.text == "Deploy now? yes"
    with pytest.raises(LookupError):
        fake.press_button(CHAT, sent.message_id, CHAT, text="Yes")

    await bot.edit_message_reply_markup(chat_id=CHAT, message_id=sent.message_id,
                                        reply_markup=keys)
    assert message.reply_markup is not None
    await bot.edit_message_reply_markup(chat_id=CHAT, message_id=sent.message_id)
    assert message.reply_markup is None and message.text == "Deploy now? yes"
    with pytest.raises(BadRequest, match=r"(?i)not modified"):
        await bot.edit_message_reply_markup(chat_id=CHAT, message_id=sent.message_id)
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_reply_markup(chat_id=CHAT, message_id=999)
