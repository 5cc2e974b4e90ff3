"""Two Slack apps in one daemon (`[slack]`, the app "default", and a `[[slack.apps]]` named
"acme"), each on its own fake Slack (Web API and Socket Mode), with the same user, DM channel
and message ts on both, routed to different agents: each message is answered by its own app
and agent, and each app keeps its own chats, dedupe keys, allow list and sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.e2e.slack_support import reply_to
from tests.fakes.slack import DEFAULT_USER, FakeSlack
from tests.harness import AgentJournal, Daemon, agent_command, base_config, run_cli, write_config

ACME_BOT_TOKEN, ACME_APP_TOKEN = "xoxb-2-acme-bot-token-x7", "xapp-2-A2-acme-app-token"
OUTSIDER = "U0OUTSIDER"  # allowed on the default app only


def agent(tmp: Path, name: str) -> dict[str, Any]:
    return {"command": agent_command(tmp / f"agent-{name}", "--name", name),
            "ready_timeout": 10, "ping_interval": 1, "ping_timeout": 1, "turn_timeout": 30,
            "shutdown_timeout": 3}


def app_keys(fake: FakeSlack, users: list[str]) -> dict[str, Any]:
    return {"bot_token": fake.bot_token, "app_token": fake.app_token, "base_url": fake.api_url,
            "file_hosts": ["127.0.0.1"], "allowed_users": users}


@asynccontextmanager
async def two_workspaces() -> AsyncIterator[tuple[FakeSlack, FakeSlack]]:
    async with FakeSlack() as home, FakeSlack(team_id="T2", team_name="Acme", app_id="A2",
                                              bot_user_id="U0ACMEBOT", bot_id="B0ACME",
                                              bot_token=ACME_BOT_TOKEN,
                                              app_token=ACME_APP_TOKEN) as acme:
        yield home, acme


def texts(fake: FakeSlack) -> list[str]:
    return [m.text for m in fake.posted_messages()]


async def test_two_apps_same_ids_each_answered_by_its_own_agent(tmp_path: Path) -> None:
    async with two_workspaces() as (home, acme):
        config = base_config(tmp_path)
        config["agent"] = agent(tmp_path, "family")
        config["agents"] = {"coder": agent(tmp_path, "coder")}
        config["routes"] = [{"agent": "coder", "bot": "acme"}]
        config["slack"] = {**app_keys(home, [DEFAULT_USER, OUTSIDER]),
                           "apps": [{"name": "acme", **app_keys(acme, [DEFAULT_USER])}]}
        path = write_config(tmp_path, config)
        async with Daemon(path) as daemon:
            await home.wait_for_socket()
            await acme.wait_for_socket()
            # The same DM channel, user and message ts on both workspaces.
            first = home.dm_message("hello home")
            await home.send_event(first)
            await acme.send_event(acme.dm_message("hello acme", ts=first["ts"]))
            await reply_to(home, first["channel"], "[family] echo: hello home")
            await reply_to(acme, first["channel"], "[coder] echo: hello acme")
            # The acme app's own allow list.
            await acme.send_event(acme.dm_message("let me in", user=OUTSIDER))
            notices = await acme.wait_for(
                lambda: [e for e in acme.ephemeral_messages if e.user == OUTSIDER])
            assert f"picobridge access allow slack@acme:{OUTSIDER}" in notices[0].text
            second = home.dm_message("what did I just say")
            await home.send_event(second)
            await acme.send_event(acme.dm_message("what did I just say", ts=second["ts"]))
            await reply_to(home, first["channel"], "[family] You said: hello home")
            await reply_to(acme, first["channel"], "[coder] You said: hello acme")
        assert daemon.returncode == 0
        for secret in (ACME_BOT_TOKEN, ACME_APP_TOKEN, home.bot_token, home.app_token):
            assert not any(secret in line for line in daemon.log_lines + daemon.stdout_lines)

    assert not any("[coder]" in text for text in texts(home))
    assert not any("[family]" in text for text in texts(acme))
    family = [m["content"] for m in AgentJournal(tmp_path / "agent-family").messages()]
    coder = [m["content"] for m in AgentJournal(tmp_path / "agent-coder").messages()]
    assert family == ["hello home", "what did I just say"]
    assert coder == ["hello acme", "what did I just say"]
    code, out, _ = await run_cli("sessions", "list", "--config", str(path))
    assert code == 0
    lines = {line.split("\t")[0]: line for line in out.splitlines()}
    assert "\tagent default\t" in lines[f"slack:{first['channel']}"]
    assert "\tagent coder\t" in lines[f"slack@acme:{first['channel']}"]
    assert not any(key.startswith("slack@acme:") and OUTSIDER in key for key in lines)
