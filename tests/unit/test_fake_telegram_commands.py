"""The fake Telegram's command lists per scope, driven by the real python-telegram-bot: set,
read and deleted per scope and language as the Bot API does, scope objects checked as strictly,
and `menu_shown` picking the list a person sees by the Bot API's order of scopes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import telegram
from telegram import (
    BotCommand,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
    BotCommandScopeChat,
    BotCommandScopeChatAdministrators,
    BotCommandScopeChatMember,
)
from telegram.error import BadRequest

from tests.fakes.telegram import FakeTelegram

CHAT, GROUP, USER = 42, -1001234567890, 7
NEW, HELP, MODEL = (BotCommand("new", "New"), BotCommand("help", "Help"),
                    BotCommand("model", "Model"))


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        server.add_chat(CHAT)
        server.add_chat(GROUP, "supergroup")
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[telegram.Bot]:
    async with telegram.Bot(fake.token, base_url=fake.base_url,
                            base_file_url=fake.base_file_url) as client:
        yield client


async def test_each_scope_holds_its_own_list_and_get_reads_exactly_that_scope(
        bot: telegram.Bot, fake: FakeTelegram) -> None:
    await bot.set_my_commands([NEW, HELP])
    await bot.set_my_commands([NEW, MODEL, HELP], scope=BotCommandScopeChat(CHAT))
    assert await bot.get_my_commands(scope=BotCommandScopeChat(CHAT)) == (NEW, MODEL, HELP)
    assert await bot.get_my_commands() == (NEW, HELP)
    # No fallback in getMyCommands: an unset scope is empty.
    assert await bot.get_my_commands(scope=BotCommandScopeChat(GROUP)) == ()
    assert await bot.get_my_commands(scope=BotCommandScopeChat(CHAT),
                                     language_code="de") == ()
    assert fake.menu_shown(CHAT, CHAT) == ["new", "model", "help"]
    assert fake.menu_shown(GROUP, USER) == ["new", "help"]
    assert await bot.delete_my_commands(scope=BotCommandScopeChat(CHAT))
    assert fake.menu_shown(CHAT, CHAT) == ["new", "help"]
    assert fake.commands_for(("chat", CHAT)) == []


async def test_a_person_sees_the_first_list_set_in_the_bot_apis_order(
        bot: telegram.Bot, fake: FakeTelegram) -> None:
    await bot.set_my_commands([HELP])
    await bot.set_my_commands([NEW], scope=BotCommandScopeAllGroupChats())
    await bot.set_my_commands([MODEL], scope=BotCommandScopeAllPrivateChats())
    assert fake.menu_shown(GROUP, USER) == ["new"] and fake.menu_shown(CHAT, CHAT) == ["model"]
    await bot.set_my_commands([HELP, NEW], scope=BotCommandScopeChat(GROUP))
    assert fake.menu_shown(GROUP, USER) == ["help", "new"]
    await bot.set_my_commands([MODEL], scope=BotCommandScopeChatAdministrators(GROUP))
    assert fake.menu_shown(GROUP, USER, admin=True) == ["model"]
    assert fake.menu_shown(GROUP, USER) == ["help", "new"]
    await bot.set_my_commands([NEW], scope=BotCommandScopeChatMember(GROUP, USER))
    assert fake.menu_shown(GROUP, USER, admin=True) == ["new"]
    await bot.set_my_commands([MODEL], language_code="de")
    assert fake.menu_shown(CHAT, CHAT, language="de") == ["model"]
    # An empty list is no list: the chat falls back to the next scope.
    await bot.set_my_commands([], scope=BotCommandScopeChat(GROUP))
    assert fake.menu_shown(GROUP, USER) == ["new"]


async def test_scope_objects_are_checked_as_the_bot_api_does(bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.set_my_commands([NEW], scope=BotCommandScopeChat(-100999))
    with pytest.raises(BadRequest, match=r"(?i)private chat"):
        await bot.set_my_commands([NEW], scope=BotCommandScopeChatMember(CHAT, USER))
    with pytest.raises(BadRequest, match=r"(?i)private chat"):
        await bot.delete_my_commands(scope=BotCommandScopeChatAdministrators(CHAT))
    with pytest.raises(BadRequest, match=r"(?i)invalid language code"):
        await bot.set_my_commands([NEW], language_code="deu")
    for scope in ({"type": "everywhere"}, {"type": "chat"}, "chat", {"chat_id": CHAT}):
        with pytest.raises(BadRequest):
            await bot.do_api_request("getMyCommands", api_kwargs={"scope": scope})
    # A chat id as a string is the same chat.
    await bot.do_api_request("setMyCommands", api_kwargs={
        "commands": [{"command": "new", "description": "New"}],
        "scope": {"type": "chat", "chat_id": str(CHAT)}})
    assert await bot.get_my_commands(scope=BotCommandScopeChat(CHAT)) == (NEW,)
