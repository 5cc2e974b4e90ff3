"""One command catalogue (bridge/contract.py) feeds /help, Telegram's command menu and Slack's
text and slash commands: they list the same commands with the same words."""

from __future__ import annotations

import re
from pathlib import Path

from picobridge.adapters.slack.events import TEXT_COMMANDS, slash_command_text, translate_command
from picobridge.adapters.telegram.adapter import COMMAND_NAMES, COMMANDS
from picobridge.contract import BRIDGE_COMMANDS, listed_commands
from picobridge.core.commands import HELP, parse_command

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "slack-app-manifest.yml"
LISTED = [c.name for c in listed_commands()]


def test_the_catalogue_offers_the_bridge_commands_and_hides_the_greeting() -> None:
    assert LISTED == ["new", "status", "stop", "agent", "help"]
    assert [c.name for c in BRIDGE_COMMANDS if not c.listed] == ["start"]


def test_help_lists_every_offered_command_with_its_description() -> None:
    lines = HELP.splitlines()
    assert [line for line in lines if line.startswith("/")] == [
        f"/{c.name}: {c.description}" for c in listed_commands()]
    assert "/start" not in HELP


def test_every_catalogued_command_is_parsed_and_nothing_else() -> None:
    for command in BRIDGE_COMMANDS:
        assert parse_command(f"/{command.name}") == command.name
        assert parse_command(f"/{command.name.upper()}@some_bot tail") == command.name
    assert parse_command("/newer") is None and parse_command("/deploy") is None


def test_telegram_menu_is_the_catalogue() -> None:
    assert [name for name, _ in COMMANDS] == LISTED
    for (_, text), command in zip(COMMANDS, listed_commands(), strict=True):
        assert text.lower() == command.description.lower() and text[0].isupper()
    # A group message that is any bridge command (/start too) is for the bot.
    assert set(COMMAND_NAMES) == {c.name for c in BRIDGE_COMMANDS}


def test_slack_commands_are_the_catalogue() -> None:
    assert sorted(TEXT_COMMANDS) == sorted(LISTED)
    for name in LISTED:
        assert slash_command_text(name) == f"/{name}"
        assert translate_command(f"!{name} please", "!") == f"/{name} please"
    assert slash_command_text("start") is None


def test_slack_app_manifest_hints_at_the_catalogue() -> None:
    hint = re.search(r'usage_hint: "([^"]*)"', MANIFEST.read_text(encoding="utf-8"))
    assert hint is not None and hint[1] == " | ".join(LISTED)
