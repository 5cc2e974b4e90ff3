"""/agent end to end: the chat's agent and buttons for the others (Telegram inline keyboard,
Slack Block Kit, the console's typed choice), /agent NAME, a refused switch, a stranger's
click, switching back resumes the old session (the fake agent recalls what was said there),
and the choice survives a daemon restart. Two fake agents say who they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.slack_support import reply_to
from tests.e2e.telegram_support import STRANGER, USER, reply_containing, started
from tests.e2e.test_named_agents import two_agents_config
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.harness import AgentJournal, Daemon, base_config, run_cli, write_config
from tests.harness import named_agent as agent

SWITCHABLE = [{"agent": "default", "switchable": ["coder"]}]


def labels(message: SentMessage) -> list[str]:
    return [button["text"] for row in message.buttons for button in row]


async def press(fake: FakeTelegram, message: SentMessage, user: int, text: str) -> str:
    update = fake.press_button(message.chat_id, message.message_id, user, text=text)
    answer = await fake.wait_for_callback_answer(update["callback_query"]["id"])
    await fake.wait_until_confirmed(update["update_id"])
    return str(answer.get("text"))


async def test_switching_on_telegram_with_buttons_and_by_name(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = two_agents_config(tmp_path, fake, routes=SWITCHABLE)
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "remember apples")
            await reply_containing(fake, USER, "[family] echo: remember apples")
            fake.user_message(USER, USER, "/agent")
            menu = await reply_containing(fake, USER, "This chat talks to the agent default")
            assert labels(menu) == ["coder", "Cancel"]
            # Someone not allowed cannot switch the chat.
            assert "only people allowed" in await press(fake, menu, STRANGER, "coder")
            # A menu of the bridge's like /model's: the click shows the choice, the switch
            # answers in the chat.
            assert await press(fake, menu, USER, "coder") == "✓ Answer: coder"
            await reply_containing(fake, USER, "Switched to the agent coder: a new "
                                               "conversation starts.")
            # Once: the menu's buttons are gone.
            shown = fake.message(menu.chat_id, menu.message_id)
            assert shown is not None and "reply_markup" not in shown
            fake.user_message(USER, USER, "remember bananas")
            await reply_containing(fake, USER, "[coder] echo: remember bananas")
            fake.user_message(USER, USER, "/agent nobody")
            await reply_containing(fake, USER, "cannot switch to the agent 'nobody': it can "
                                               "switch to default")
            fake.user_message(USER, USER, "/agent default")
            await reply_containing(fake, USER, "Switched to the agent default: back to your "
                                               "conversation there.")
            fake.user_message(USER, USER, "what did I just say")
            await reply_containing(fake, USER, "[family] You said: remember apples")
            fake.user_message(USER, USER, "/agent coder")
            await reply_containing(fake, USER, "Switched to the agent coder: back to")
        # The choice is stored: after a restart the chat still talks to the coder.
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "what did I just say")
            await reply_containing(fake, USER, "[coder] You said: remember bananas")
        coder = [m["content"] for m in AgentJournal(tmp_path / "agent-coder").messages()]
        assert coder == ["remember bananas", "what did I just say"]
        code, out, _ = await run_cli("sessions", "show", f"telegram:{USER}", "--config",
                                     str(config))
        assert code == 0 and "agent coder" in out and "agent default" in out


async def test_a_chat_without_switchable_agents_cannot_switch(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = two_agents_config(tmp_path, fake, routes=[])
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            fake.user_message(USER, USER, "/agent")
            menu = await reply_containing(fake, USER, "talks to the agent default; it cannot")
            assert menu.buttons == []
            fake.user_message(USER, USER, "/agent coder")
            await reply_containing(fake, USER, "cannot switch to the agent 'coder': it cannot "
                                               "switch to another")
            fake.user_message(USER, USER, "still here")
            await reply_containing(fake, USER, "[family] echo: still here")


def slack_two_agents(tmp: Path, fake: FakeSlack) -> Path:
    made: dict[str, Any] = base_config(tmp)
    made["agent"] = agent(tmp, "family")
    made["agents"] = {"coder": agent(tmp, "coder")}
    made["routes"] = SWITCHABLE
    made["slack"] = {"bot_token": fake.bot_token, "app_token": fake.app_token,
                     "base_url": fake.api_url, "file_hosts": ["127.0.0.1"],
                     "allowed_users": [DEFAULT_USER]}
    return write_config(tmp, made)


async def test_switching_on_slack_with_block_kit_buttons(tmp_path: Path) -> None:
    async with FakeSlack() as fake, Daemon(slack_two_agents(tmp_path, fake)):
        await fake.wait_for_socket()
        event = fake.dm_message("remember pears")
        await fake.send_event(event)
        channel = event["channel"]
        await reply_to(fake, channel, "[family] echo: remember pears")
        await fake.send_event(fake.dm_message("!agent"))
        menu = await reply_to(fake, channel, "This chat talks to the agent default")
        buttons = [e["text"]["text"] for b in menu.blocks or () if b["type"] == "actions"
                   for e in b["elements"]]
        assert buttons == ["coder", "Cancel"]
        envelope = await fake.click(menu, "coder", user=DEFAULT_USER)
        await fake.wait_for_ack(envelope["envelope_id"])
        await reply_to(fake, channel, "Switched to the agent coder: a new conversation")
        await fake.send_event(fake.dm_message("hello coder"))
        await reply_to(fake, channel, "[coder] echo: hello coder")
        await fake.send_slash_command("/picobridge", "agent default")
        await reply_to(fake, channel, "Switched to the agent default: back to")
        await fake.send_event(fake.dm_message("what did I just say"))
        await reply_to(fake, channel, "[family] You said: remember pears")


async def test_switching_in_the_console(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    config["agent"] = agent(tmp_path, "family")
    config["agents"] = {"coder": agent(tmp_path, "coder")}
    config["routes"] = SWITCHABLE
    path = write_config(tmp_path, config)
    code, out, err = await run_cli("chat", "--config", str(path), stdin=(
        b"remember plums\n/agent\n/agent coder\nhello\n/agent default\nwhat did I just say\n"))
    assert code == 0, err
    assert "[family] echo: remember plums" in out
    assert "This chat talks to the agent default. Switch to:" in out
    assert "1. coder  (/agent coder)" in out
    assert "[coder] echo: hello" in out
    assert "[family] You said: remember plums" in out
