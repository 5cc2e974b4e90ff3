"""Which agents a bot's chats can reach (core/routes.py `Routing.reachable`): what Discord's
slash commands and the Slack manifest offer, since they cannot follow each chat."""

from __future__ import annotations

from picobridge.core.routes import Route, Routing


def test_a_bots_agents_are_its_routes_and_their_switches_until_one_takes_every_chat() -> None:
    routing = Routing([
        Route("coder", chats=("chat:-100*",)),
        Route("family", platform="chat", bot="home", switchable=("coder", "helper")),
        Route("ops", platform="other"),
        Route("guest", kind="private"),
    ], "default")
    # The home bot's catch-all route ends the search: the default is never reached.
    assert routing.reachable("chat@home") == ("family", "coder", "helper")
    # The default bot: the chat-key route, the kind route, then the default agent.
    assert routing.reachable("chat") == ("coder", "guest", "default")
    assert routing.reachable("other") == ("ops",)
    # A chat key naming another platform cannot match this one.
    assert routing.reachable("third") == ("guest", "default")
    # The agent a bot's chats get by default: its first route that takes every one of them.
    assert [routing.bot_agent(b) for b in ("chat@home", "chat", "other")] == [
        "family", "default", "ops"]


def test_by_kind_a_route_for_the_other_kind_is_left_out_and_one_for_this_kind_takes_all() -> None:
    routing = Routing([Route("coder", kind="group"), Route("guest", kind="private")], "default")
    assert routing.reachable("chat", "group") == ("coder",)
    assert routing.reachable("chat", "private") == ("guest",)
    assert routing.reachable("chat") == ("coder", "guest", "default")
