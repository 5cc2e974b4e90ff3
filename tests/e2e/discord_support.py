"""Shared pieces of the Discord end-to-end tests: the daemon's config against a FakeDiscord,
waiting for it to be online, and the checks every run ends with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.discord import DEFAULT_USER, OTHER_USER, FakeDiscord
from tests.harness import AgentJournal, Daemon, base_config, write_config


def discord_config(tmp: Path, fake: FakeDiscord, *agent_flags: str,
                   agent: dict[str, Any] | None = None,
                   sections: dict[str, Any] | None = None, **discord: Any) -> Path:
    """A config file for `picobridge run` against `fake`; `sections` adds top-level tables."""
    config = base_config(tmp, *agent_flags, **(agent or {}))
    config.update(sections or {})
    config["discord"] = {"token": fake.token, "base_url": fake.base_url,
                         "allowed_users": [DEFAULT_USER, OTHER_USER], **discord}
    return write_config(tmp, config)


async def online(daemon: Daemon, fake: FakeDiscord, sessions: int = 1) -> None:
    """The daemon signed in and holds a gateway session."""
    await daemon.wait_for_log(r"Discord: signed in as")
    await fake.wait_ready(sessions, timeout=30)


def assert_no_token(daemon: Daemon, fake: FakeDiscord) -> None:
    for line in daemon.log_lines + daemon.stdout_lines:
        assert fake.token not in line, f"the token leaked into the log: {line[:200]!r}"
        assert "[REDACTED]" not in line, f"something tried to log a secret: {line[:200]!r}"


def add_people(fake: FakeDiscord, people: dict[str, str]) -> None:
    """People (user id -> name) of a module whose tests share one daemon, one or more each."""
    for user_id, name in people.items():
        fake.add_user(user_id, name)


def agent_messages(agent_state: Path, channel_id: str) -> list[dict[str, Any]]:
    """What the fake agent received from one channel (its own and its threads' sessions,
    `discord.<channel>[.<thread>].…`): a test sharing the daemon sees only its own."""
    prefix = f"discord.{channel_id}"
    return [m for m in AgentJournal(agent_state).messages()
            if m["session"] == prefix or m["session"].startswith(prefix + ".")]
