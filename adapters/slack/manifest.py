"""The Slack app manifest an operator pastes into Slack, with the app's slash command: its
name (`slack.slash_command`) and, in its description and hint, the commands the agents the
app's routes reach offer; and the app's events path (`events_path`, `/slack/NAME/events` for
a further app) in the placeholder request URLs of HTTP mode. The template (app-manifest.yml,
shipped with the package; the repository's deploy/slack-app-manifest.yml is it) lists every
command."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from importlib import resources

from picobridge.contract import BridgeCommand

TEMPLATE = "app-manifest.yml"
# The placeholders of the request URLs (events, interactivity, the slash command).
_URL = "https://bot.example.com"
_DEFAULT_PATH = "/slack/events"
_SLASH = re.compile(r"(?m)^(    - command: )\S+\n(      description: ).*\n(      usage_hint: ).*$")


def template() -> str:
    return resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")


def manifest(slash_command: str, commands: Sequence[BridgeCommand],
             events_path: str = _DEFAULT_PATH) -> str:
    names = [c.name for c in commands if c.listed]
    description = json.dumps("Talk to the bridge and the agent: " + ", ".join(names))
    hint = json.dumps(" | ".join(names))
    text, found = _SLASH.subn(lambda m: f"{m[1]}{slash_command}\n{m[2]}{description}\n"
                              f"{m[3]}{hint}", template(), count=1)
    assert found == 1, "the manifest template has no slash command"
    return text.replace(f"{_URL}{_DEFAULT_PATH}\n", f"{_URL}{events_path}\n")
