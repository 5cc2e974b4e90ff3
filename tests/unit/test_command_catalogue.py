"""One command catalogue (bridge/contract/commands.py) feeds /help, Telegram's command menu and
Slack's text and slash commands: they list the same commands with the same words, and a chat
sees the agent commands only where its agent's protocol driver declares them."""

from __future__ import annotations

import re
from pathlib import Path

from picobridge.adapters.common.textcommands import TEXT_COMMANDS, translate_command
from picobridge.adapters.slack.events import slash_command_text
from picobridge.adapters.telegram.commands import COMMAND_NAMES, command_menu
from picobridge.agent.protocols import PROTOCOLS, driver_class
from picobridge.contract import AGENT_COMMANDS, ALL_COMMANDS, catalogue, listed_commands
from picobridge.core.commands import HELP, help_text, parse_command

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "slack-app-manifest.yml"
LISTED = [c.name for c in listed_commands()]
EVERY = [c.name for c in ALL_COMMANDS if c.listed]
COMMANDS = command_menu(listed_commands())


def test_the_catalogue_offers_the_bridge_commands_and_hides_the_greeting() -> None:
    assert LISTED == ["new", "status", "stop", "agent", "mode", "sessions", "resume", "help"]
    assert [c.name for c in ALL_COMMANDS if not c.listed] == ["start"]
    assert {"model", "think", "compact", "export"} == AGENT_COMMANDS


def test_each_protocol_declares_only_catalogued_agent_commands() -> None:
    declared = {name: frozenset(driver_class(name).commands) for name in PROTOCOLS}
    assert declared == {"picobot-json": frozenset(),
                        "prime-rpc": frozenset({"model", "think", "compact", "export"})}
    prime = [c.name for c in listed_commands(declared["prime-rpc"])]
    assert prime == ["new", "status", "stop", "agent", "mode", "model", "think", "compact",
                     "export", "sessions", "resume", "help"]
    assert [c.name for c in catalogue(declared["picobot-json"])] == [
        c.name for c in ALL_COMMANDS if not c.agent]


def test_help_lists_the_chat_agents_commands_with_their_descriptions() -> None:
    lines = HELP.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("/")] == [
        f"/{c.name}{' ' + c.usage if c.usage else ''}" for c in listed_commands()]
    assert "/model" not in HELP and "/start" not in HELP
    prime = help_text(frozenset({"model", "think"}))
    assert "/model [name]: choose the agent's model" in prime
    assert "/think [level]" in prime and "/compact" not in prime


def test_every_catalogued_command_is_parsed_with_its_argument_and_nothing_else() -> None:
    for command in ALL_COMMANDS:
        assert parse_command(f"/{command.name}") == (command.name, "")
        assert parse_command(f"/{command.name.upper()}@some_bot tail") == (command.name, "tail")
    assert parse_command("/compact  keep the\nfile names ") == ("compact",
                                                               "keep the\nfile names")
    assert parse_command("/newer") is None and parse_command("/deploy") is None


def test_telegram_menu_is_the_catalogue_of_the_agent() -> None:
    assert [name for name, _ in COMMANDS] == LISTED
    for (_, text), command in zip(COMMANDS, listed_commands(), strict=True):
        assert text.lower() == command.description.lower() and text[0].isupper()
    prime = command_menu(catalogue({"model", "compact"}))
    assert [name for name, _ in prime] == ["new", "status", "stop", "agent", "mode", "model",
                                           "compact", "sessions", "resume", "help"]
    # A group message that is any chat command (/start too) is for the bot.
    assert set(COMMAND_NAMES) == {c.name for c in ALL_COMMANDS}


def test_slack_commands_are_the_catalogue() -> None:
    assert sorted(TEXT_COMMANDS) == sorted(EVERY)
    for name in EVERY:
        assert slash_command_text(name) == f"/{name}"
        assert translate_command(f"!{name} please", "!") == f"/{name} please"
    assert slash_command_text("start") is None


def test_slack_app_manifest_hints_at_the_catalogue() -> None:
    hint = re.search(r'usage_hint: "([^"]*)"', MANIFEST.read_text(encoding="utf-8"))
    assert hint is not None and hint[1] == " | ".join(EVERY)
