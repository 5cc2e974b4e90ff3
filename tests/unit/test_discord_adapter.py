"""The Discord adapter's pure parts: rendering, the routed HTTP client, the record of active
channels, the slash command catalogue, the token shape."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from discord.http import Route
from pydantic import TypeAdapter

from picobridge.adapters.discord.client import RoutedHTTP
from picobridge.adapters.discord.commands import catalogue
from picobridge.adapters.discord.platform import DiscordPlatform
from picobridge.adapters.discord.render import escape, render
from picobridge.adapters.discord.seen import Seen
from picobridge.adapters.discord.settings import DiscordSettings
from picobridge.config.values import Secret
from picobridge.contract import catalogue as catalogue_of
from picobridge.contract import listed_commands


def test_discord_syntax_is_escaped_outside_code_only() -> None:
    text = "hi <@123> @everyone ||secret|| `<@1>`\n```\n<#5> @here\n```"
    assert escape(text) == ("hi \\<@123> \\@everyone \\|\\|secret\\|\\| `<@1>`\n"
                            "```\n<#5> @here\n```")


def test_render_splits_at_2000_and_keeps_code_blocks_whole() -> None:
    code = "```py\n" + "\n".join(f"x{n} = {n}" for n in range(400)) + "\n```"
    pieces = render("intro\n\n" + code)
    assert len(pieces) > 1
    assert all(len(p) <= 2000 for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    assert render("  \n ") == []


def test_the_routed_client_rewrites_only_its_own_requests() -> None:
    http = RoutedHTTP("http://127.0.0.1:9/api/v10", asyncio.new_event_loop())
    url = Route("GET", "/users/@me").url
    assert url.startswith("https://discord.com/api/v10")  # the class attribute is untouched
    assert http.routed(url) == "http://127.0.0.1:9/api/v10/users/@me"
    assert RoutedHTTP("https://discord.com/api/v10", http.loop).routed(url) == url
    http.gateway_url = "ws://127.0.0.1:9/gateway"
    assert http.gateway("wss://gateway.discord.gg/?v=10&encoding=json&compress=zlib-stream") \
        == "ws://127.0.0.1:9/gateway?v=10&encoding=json&compress=zlib-stream"
    # A resume goes where READY said, untouched.
    assert http.gateway("ws://elsewhere:1/r?v=10") == "ws://elsewhere:1/r?v=10"
    http.loop.close()


class Cursors:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get_cursor(self, name: str) -> str | None:
        return self.values.get(name)

    async def set_cursor(self, name: str, value: str) -> None:
        self.values[name] = value


async def test_seen_keeps_the_newest_message_of_the_most_recent_channels() -> None:
    cursors = Cursors()
    seen = Seen(cursors, size=2)
    await seen.saw("1", "100")
    await seen.saw("2", "200")
    await seen.saw("1", "90")  # older than what is recorded: ignored
    await seen.saw("3", "300")  # pushes out the least recently active
    assert await Seen(cursors, size=2).load() == {"2": "200", "3": "300"}
    cursors.values["discord.seen"] = "not json"
    assert await Seen(cursors, size=2).load() == {}


def test_the_slash_commands_come_from_the_bridge_catalogue() -> None:
    commands = catalogue(catalogue_of(), in_dms=True)
    assert [c["name"] for c in commands] == [c.name for c in listed_commands()]
    assert [c["name"] for c in commands][:3] == ["new", "status", "stop"]
    assert "start" not in [c["name"] for c in commands]  # unlisted: works, not offered
    # An agent's own commands, where its driver has them, in the catalogue's order.
    with_agent = [c["name"] for c in catalogue(catalogue_of(["think", "model"]), in_dms=True)]
    assert with_agent == [c.name for c in listed_commands(["model", "think"])]
    assert "model" in with_agent and "compact" not in with_agent
    assert all(c["options"][0]["type"] == 3 and not c["options"][0]["required"]
               for c in commands)
    assert all(1 <= len(c["description"]) <= 100 and c["description"][0].isupper()
               for c in commands)


def test_token_and_user_id_shapes() -> None:
    platform = DiscordPlatform()
    good = DiscordSettings(token=Secret("MTIzNDU2Nzg5MDEy.GfAkE1.abcdefghijklmnopqrstuvwxyz0"))
    assert platform.token_problems(good) == []
    bad = DiscordSettings(token=Secret("Bot MTIz"))
    (problem,) = platform.token_problems(bad)
    assert "discord.token" in problem and "MTIz" not in problem.replace("(MTI...)", "")
    assert platform.user_id_problem("400000000000000001") is None
    assert platform.user_id_problem("alice") is not None
    with pytest.raises(ValueError, match="numbers written as strings"):
        TypeAdapter(DiscordSettings).validate_python({"allowed_users": ["@alice"]})


def test_the_invite_url_asks_for_the_permissions_the_docs_list() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "discord.md").read_text("utf-8")
    (asked,) = set(re.findall(r"permissions=(\d+)", doc))
    listed = [int(v) for v in re.findall(r"^\| [A-Z][^|]+ \| (\d+) \|", doc, flags=re.M)]
    assert len(listed) == 7 and sum(listed) == int(asked)
    assert all(v & (v - 1) == 0 for v in listed)  # each one permission bit
