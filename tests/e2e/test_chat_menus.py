"""Each Telegram chat's command menu shows what its agent offers, end to end through
`picobridge run` and the fake Bot API (which answers per scope as Telegram does): the bot's own
menu holds the default agent's commands (picobot: no /model); a chat routed to a prime-rpc
agent, or switched to it with /agent, gets a menu of its own with /model, /think...; switching
back takes it away; a restart sends nothing for chats whose menu is already right; a 429 on
setMyCommands (and a 502) is waited out while messages flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from picobridge.agent.protocols.prime_rpc import PrimeRpcDriver
from picobridge.contract import listed_commands
from tests.e2e.prime_rpc_support import fake_agent_settings
from tests.e2e.telegram_support import USER, reply_containing, started
from tests.e2e.test_named_agents import mention
from tests.fakes.server import Call
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, base_config, write_config
from tests.harness import named_agent as agent

DEV_CHAT = -100700  # routed to the coder
NEW_CHAT = -100800  # routed to the coder, first heard from after the restart
# (The coder is the fake prime agent, "you said: ..."; in groups the sender's name leads.)
FAMILY = [c.name for c in listed_commands()]
CODER = [c.name for c in listed_commands(PrimeRpcDriver.commands)]
ROUTES = [{"agent": "coder", "chats": [f"telegram:{DEV_CHAT}", f"telegram:{NEW_CHAT}"]},
          {"agent": "default", "switchable": ["coder"]}]


def menus_config(tmp: Path, fake: FakeTelegram,
                 routes: list[dict[str, Any]] | None = None) -> Path:
    config: dict[str, Any] = base_config(tmp)
    config["agent"] = agent(tmp, "family")
    config["agents"] = {"coder": fake_agent_settings(tmp)}
    config["routes"] = routes if routes is not None else ROUTES
    config["telegram"] = {"token": fake.token, "base_url": fake.base_url,
                          "base_file_url": fake.base_file_url, "allowed_users": [USER],
                          "rate_limiter": False}
    return write_config(tmp, config)


def scoped(fake: FakeTelegram, chat_id: int, since: int = 0) -> list[Call]:
    """The calls that set or dropped the chat's own menu (from the `since`-th call on)."""
    return [c for c in fake.calls[since:]
            if c.method in ("setMyCommands", "deleteMyCommands")
            and c.params.get("scope") == {"type": "chat", "chat_id": chat_id}]


async def up(daemon: Daemon, fake: FakeTelegram, own: list[str]) -> None:
    """The daemon polls and the bot's own menu is `own`."""
    await started(daemon, fake)
    await fake.wait_for(lambda: fake.commands_for() == own, "the bot's own menu")


async def shows(fake: FakeTelegram, chat_id: int, names: list[str]) -> None:
    await fake.wait_for(lambda: fake.menu_shown(chat_id, USER) == names,
                        f"chat {chat_id} showing {names}")


async def test_routed_and_switched_chats_show_their_agents_menu_and_a_restart_resends_nothing(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        fake.add_chat(DEV_CHAT, "supergroup", title="dev")
        fake.add_chat(NEW_CHAT, "supergroup", title="new")
        config = menus_config(tmp_path, fake)
        async with Daemon(config) as daemon:
            await up(daemon, fake, FAMILY)
            fake.user_message(USER, USER, "hello")
            await reply_containing(fake, USER, "[family] echo: hello")
            fake.user_message(DEV_CHAT, USER, mention(fake, "hello coder"))
            await reply_containing(fake, DEV_CHAT, "you said: Test: hello coder")
            await shows(fake, DEV_CHAT, CODER)
            assert "model" in CODER and "model" not in FAMILY
            # The private chat is on the default agent: the bot's own menu, nothing set.
            assert fake.menu_shown(USER, USER) == FAMILY and scoped(fake, USER) == []

            fake.user_message(USER, USER, "/agent coder")
            await reply_containing(fake, USER, "Switched to the agent coder")
            await shows(fake, USER, CODER)
            assert fake.commands_for(("chat", USER)) == CODER
            fake.user_message(USER, USER, "/agent default")
            await reply_containing(fake, USER, "Switched to the agent default")
            await shows(fake, USER, FAMILY)
            # Back on the bot's own menu: the chat's own list is gone, not a copy of it.
            assert fake.commands_for(("chat", USER)) == []
            assert [c.method for c in scoped(fake, USER)] == ["setMyCommands",
                                                              "deleteMyCommands"]
            fake.user_message(USER, USER, "/agent coder")
            await reply_containing(fake, USER, "Switched to the agent coder: back to")
            await shows(fake, USER, CODER)
        before = len(fake.calls)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "again")
            await reply_containing(fake, USER, "you said: again")
            fake.user_message(DEV_CHAT, USER, mention(fake, "again"))
            await reply_containing(fake, DEV_CHAT, "you said: Test: again")
            # A chat first heard from now gets its menu: the two before would have had theirs
            # set at their messages, before their answers.
            fake.user_message(NEW_CHAT, USER, mention(fake, "first"))
            await reply_containing(fake, NEW_CHAT, "you said: Test: first")
            await shows(fake, NEW_CHAT, CODER)
            assert scoped(fake, USER, before) == [] and scoped(fake, DEV_CHAT, before) == []
            assert fake.menu_shown(USER, USER) == CODER
            assert fake.menu_shown(DEV_CHAT, USER) == CODER
            # The bot's own menu was right already: read, not set again.
            assert [c for c in fake.calls[before:] if c.method == "setMyCommands"
                    and "scope" not in c.params] == []


async def test_a_429_and_a_502_on_a_chats_menu_are_waited_out_while_messages_flow(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        fake.add_chat(DEV_CHAT, "supergroup", title="dev")
        async with Daemon(menus_config(tmp_path, fake)) as daemon:
            await up(daemon, fake, FAMILY)
            fake.fail_next("setMyCommands", 429, retry_after=3)
            fake.fail_next("setMyCommands", 502)  # then a failing Telegram
            fake.user_message(DEV_CHAT, USER, mention(fake, "one"))
            await reply_containing(fake, DEV_CHAT, "you said: Test: one")
            fake.user_message(DEV_CHAT, USER, mention(fake, "two"))
            await reply_containing(fake, DEV_CHAT, "you said: Test: two")
            await shows(fake, DEV_CHAT, CODER)
            # One menu for the chat, though two of its messages came while it waited.
            refused, failed, taken = scoped(fake, DEV_CHAT)
            assert (refused.status, failed.status) == (429, 502) and taken.ok
            # The retry-after was waited out: the fake judges each repeat of a 429'd call.
            assert fake.retries == [failed] and fake.early_retries == []
            assert daemon.returncode is None


async def test_a_bot_whose_routes_take_its_chats_to_another_agent_shows_that_agents_menu(
        tmp_path: Path) -> None:
    # Its own menu is the agent its chats get by default (the route taking all of them): only
    # the chat routed back to the picobot default gets a menu of its own.
    async with FakeTelegram() as fake:
        fake.add_chat(DEV_CHAT, "supergroup", title="dev")
        config = menus_config(tmp_path, fake, routes=[
            {"agent": "default", "chats": [f"telegram:{DEV_CHAT}"]},
            {"agent": "coder", "platform": "telegram"}])
        async with Daemon(config) as daemon:
            await up(daemon, fake, CODER)
            fake.user_message(USER, USER, "hello")
            await reply_containing(fake, USER, "you said: hello")
            fake.user_message(DEV_CHAT, USER, mention(fake, "hello family"))
            await reply_containing(fake, DEV_CHAT, "[family] echo: Test: hello family")
            await shows(fake, DEV_CHAT, FAMILY)
            # The private chat came first: had it needed a menu, it would have been set then.
            assert scoped(fake, USER) == [] and fake.menu_shown(USER, USER) == CODER
