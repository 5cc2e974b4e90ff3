"""The named agents of a configuration: `[agent]` is the agent "default", `[agents.NAME]`
the others; routes and `bridge.default_agent` must name one of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from picobridge.config.sections import AgentSettings

if TYPE_CHECKING:
    from picobridge.config.settings import Settings


def named_agents(settings: Settings) -> dict[str, AgentSettings]:
    """Every agent by name. `[agent]` is the agent "default", defined when the config has
    that section, or has no `[agents.NAME]` (as before there were several)."""
    from picobridge.contract import DEFAULT_AGENT

    agents = dict(settings.agents)
    if "agent" in settings.configured or not agents:
        agents = {DEFAULT_AGENT: settings.agent, **agents}
    return agents


def check_agents(settings: Settings) -> None:
    """Raise ValueError for an agent name that cannot be, or a route or default naming an
    agent that is not defined."""
    from picobridge.contract import DEFAULT_AGENT, valid_name

    for name in settings.agents:
        if name == DEFAULT_AGENT:
            raise ValueError(f"agents.{name}: the agent '{name}' is [agent]; name this one "
                             "otherwise or put it in [agent]")
        if not valid_name(name):
            raise ValueError(f"agents.{name}: an agent name is 1 to 40 of A-Z a-z 0-9 _ -")
    known = named_agents(settings)
    wanted = [("bridge.default_agent", settings.bridge.default_agent)]
    for i, route in enumerate(settings.routes):
        wanted.append((f"routes[{i}].agent", route.agent))
        wanted.extend((f"routes[{i}].switchable", name) for name in route.switchable)
    for where, name in wanted:
        if name not in known:
            raise ValueError(f"{where}: no agent named '{name}' (defined: "
                             f"{', '.join(sorted(known))})")
