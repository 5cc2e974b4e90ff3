"""Shared pieces of the Slack end-to-end tests: the daemon's config against a FakeSlack, and
checks that every test run ends with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.slack import DEFAULT_USER, FakeSlack, PostedMessage
from tests.harness import Daemon, base_config, write_config
from tests.harness import http_port as http_port  # moved to the harness; kept for old imports

SIGNING_SECRET = "e2e-signing-secret-3f9a7c1d"


def slack_config(tmp: Path, fake: FakeSlack, *agent_flags: str, mode: str = "socket",
                 agent: dict[str, Any] | None = None, sections: dict[str, Any] | None = None,
                 **slack: Any) -> Path:
    """A config file for `picobridge run` against `fake`; `agent` overrides agent settings,
    `sections` adds top-level tables."""
    config = base_config(tmp, *agent_flags, **(agent or {}))
    config.update(sections or {})
    config["slack"] = {
        "bot_token": fake.bot_token,
        "app_token": fake.app_token,
        "base_url": fake.api_url,
        "file_hosts": ["127.0.0.1"],
        "allowed_users": [DEFAULT_USER],
        **slack,
    }
    if mode == "http":
        config["slack"].update(mode="http", signing_secret=SIGNING_SECRET)
        config["http"] = {"listen": "127.0.0.1:0"}
    return write_config(tmp, config)


def secrets_of(fake: FakeSlack) -> list[str]:
    return [fake.bot_token, fake.app_token, SIGNING_SECRET]


def assert_no_secrets(daemon: Daemon, fake: FakeSlack) -> None:
    for line in daemon.log_lines + daemon.stdout_lines:
        for secret in secrets_of(fake):
            assert secret not in line, f"a secret leaked into the log: {line[:200]!r}"


def texts(messages: list[PostedMessage]) -> list[str]:
    return [m.text for m in messages]


async def reply_to(fake: FakeSlack, channel: str, needle: str, *, thread_ts: str | None = None,
                   timeout: float = 30.0) -> PostedMessage:
    """The bot's message in `channel` (optionally in a thread) whose text contains `needle`."""
    return await fake.wait_for_message(channel=channel, thread_ts=thread_ts,
                                       predicate=lambda m: needle in m.text, timeout=timeout)


def all_acked(fake: FakeSlack) -> bool:
    """Every event delivered so far was acknowledged (or Slack gave up waiting for it)."""
    done = set(fake.acked_envelope_ids) | set(fake.ack_timeouts)
    return all(d.envelope_id in done for d in fake.deliveries)
