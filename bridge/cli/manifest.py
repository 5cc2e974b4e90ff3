"""`picobridge manifest BOT`: the app manifest of a bot whose platform keeps its commands in
one (Slack's slash command), listing what the agents that bot's routes reach offer; the
platform's command menus cannot follow each chat there, and the bridge answers a command
the chat's own agent lacks with a word saying so."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from picobridge import exit_codes
from picobridge.cli.errors import CliError

if TYPE_CHECKING:
    from picobridge.cli.invocation import Invocation


def manifest_command(invocation: Invocation) -> int:
    from picobridge.adapters.registry import bots
    from picobridge.agent.protocols import driver_class
    from picobridge.cli.routing import build_routing
    from picobridge.contract import catalogue

    settings = invocation.settings()
    found = bots(settings)
    name = invocation.args.bot
    if name not in found:
        raise CliError(f"no bot {name!r}: the configured ones are {', '.join(found)}",
                       exit_codes.USAGE)
    platform, section = found[name]
    agents = settings.named_agents()
    reached = [agents[a] for a in build_routing(settings, {}).reachable(name) if a in agents]
    commands = catalogue({c for agent in reached for c in driver_class(agent.protocol).commands})
    text = platform.manifest(section, commands)
    if text is None:
        raise CliError(f"{platform.name} has no app manifest: its bots register their "
                       "commands themselves", exit_codes.USAGE)
    sys.stdout.write(text)
    return exit_codes.OK
