"""`picobridge manifest BOT` prints the Slack app manifest whose slash command lists what the
agents that app's routes reach offer: an app routed to a prime-rpc agent has /model, /think...
in its hint; the default app on picobot has not; a platform without manifests says so."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.prime_rpc_support import fake_agent_settings
from tests.harness import base_config, run_cli, write_config


def slash_lines(out: str) -> list[str]:
    after = out.split("slash_commands:\n", 1)[1].splitlines()
    return [line.strip() for line in after[:3]]


async def test_each_apps_manifest_lists_what_its_routes_reach(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    config["agents"] = {"coder": fake_agent_settings(tmp_path)}
    keys = {"bot_token": "xoxb-1-2-abc", "app_token": "xapp-1-A1-2-abc"}
    config["slack"] = {**keys, "apps": [{"name": "work", "slash_command": "/work", **keys}]}
    config["routes"] = [{"agent": "coder", "platform": "slack", "bot": "work"}]
    path = write_config(tmp_path, config)
    code, out, err = await run_cli("manifest", "slack@work", "--config", str(path))
    assert code == 0, err
    command, description, hint = slash_lines(out)
    assert command == "- command: /work"
    assert hint == ('usage_hint: "new | status | stop | agent | mode | model | think | compact '
                    '| export | sessions | resume | help"')
    assert "model, think" in description
    assert "xoxb-" not in out + err and "xapp-" not in out + err
    code, out, err = await run_cli("manifest", "slack", "--config", str(path))
    assert code == 0, err
    command, _, hint = slash_lines(out)
    assert command == "- command: /picobridge" and "model" not in hint and "| mode |" in hint
    code, out, err = await run_cli("manifest", "telegram", "--config", str(path))
    assert code == 2 and out == "" and "no app manifest" in err


async def test_each_apps_manifest_points_its_request_urls_at_its_own_events_path(
        tmp_path: Path) -> None:
    config = base_config(tmp_path)
    keys = {"bot_token": "xoxb-1-2-abc", "mode": "http", "signing_secret": "s3cr3t-signing"}
    config["slack"] = {**keys, "apps": [{"name": "acme", **keys},
                                        {"name": "beta", **keys, "events_path": "/in/beta"}]}
    config["http"] = {"listen": "127.0.0.1:0"}
    path = write_config(tmp_path, config)
    for bot, events in (("slack", "/slack/events"), ("slack@acme", "/slack/acme/events"),
                        ("slack@beta", "/in/beta")):
        code, out, err = await run_cli("manifest", bot, "--config", str(path))
        assert code == 0, err
        urls = re.findall(r"^\s*# (?:request_)?url: (\S+)$", out, re.MULTILINE)
        # The events, interactivity and slash command placeholders, all on the app's path.
        assert urls == [f"https://bot.example.com{events}"] * 3, (bot, urls)
        assert "s3cr3t-signing" not in out + err
