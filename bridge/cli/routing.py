"""The routes of the configuration, as the core reads them (`run`, `check`, `manifest`)."""

from __future__ import annotations

from collections.abc import Mapping

from picobridge.config.settings import Settings
from picobridge.core.routes import Route, Routing


def build_routing(settings: Settings, chosen: Mapping[str, str]) -> Routing:
    routes = [Route(r.agent, r.platform, r.bot, tuple(r.chats) if r.chats is not None else None,
                    frozenset(r.users) if r.users is not None else None, r.kind,
                    tuple(r.switchable)) for r in settings.routes]
    return Routing(routes, settings.bridge.default_agent, chosen)
