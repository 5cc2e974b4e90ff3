"""Shared pieces of the Telegram end-to-end tests: the daemon's config against a FakeTelegram,
waiting for the bot's answers, the checks every run ends with, and one daemon shared by a
module's tests (`shared_daemon`, `SharedDaemon.test`)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.telegram import Call, FakeTelegram, SentMessage
from tests.harness import WAIT, AgentJournal, Daemon, base_config, write_config

USER = 4242  # allowed in every test config
OTHER_USER = 4343  # allowed too, for groups with two speakers
STRANGER = 9999  # never allowed


def telegram_config(tmp: Path, fake: FakeTelegram, *agent_flags: str,
                    agent: dict[str, Any] | None = None,
                    sections: dict[str, Any] | None = None, **telegram: Any) -> Path:
    """A config file for `picobridge run` against `fake`; `sections` adds top-level tables."""
    config = base_config(tmp, *agent_flags, **(agent or {}))
    config.update(sections or {})
    config["telegram"] = {
        "token": fake.token,
        "base_url": fake.base_url,
        "base_file_url": fake.base_file_url,
        "allowed_users": [USER, OTHER_USER],
        # The limiter would only slow the tests down; test_telegram_flood_limits has it on.
        "rate_limiter": False,
        **telegram,
    }
    return write_config(tmp, config)


def assert_no_token(daemon: Daemon, token: str) -> None:
    """The token must not even reach the log redactor: nothing of ours tried to log it."""
    for line in daemon.log_lines + daemon.stdout_lines:
        assert token not in line, f"the token leaked into the log: {line[:200]!r}"
        assert "[REDACTED]" not in line, f"something tried to log a secret: {line[:200]!r}"


def replies(fake: FakeTelegram, chat_id: int, needle: str) -> list[SentMessage]:
    return [m for m in fake.sent_messages(chat_id) if needle in (m.text or m.caption or "")]


async def reply_containing(fake: FakeTelegram, chat_id: int, needle: str,
                           timeout: float = 30.0) -> SentMessage:
    await fake.wait_for(lambda: bool(replies(fake, chat_id, needle)),
                        f"a reply containing {needle!r} in chat {chat_id}", timeout)
    return replies(fake, chat_id, needle)[0]


async def started(daemon: Daemon, fake: FakeTelegram) -> None:
    """The daemon is connected and long-polling."""
    await daemon.wait_for_log(r"connected to Telegram as @")
    await fake.wait_for_poll(timeout=60)


@dataclass
class SharedDaemon:
    """One daemon and its FakeTelegram serving a whole module: each test talks in its own
    chats, and looks only at the part of the log written since it started (`log`)."""

    fake: FakeTelegram
    daemon: Daemon
    tmp: Path
    log_start: int = 0
    calls_start: int = 0

    @property
    def calls(self) -> list[Call]:
        """The calls the fake took during the current test."""
        return self.fake.calls[self.calls_start:]

    @property
    def log(self) -> str:
        """What the daemon logged during the current test."""
        return self.daemon.log_since(self.log_start)

    async def wait_for_log(self, pattern: str, timeout: float = WAIT) -> str:
        """The first line matching `pattern` logged during the current test."""
        regex = re.compile(pattern)

        def found() -> list[str]:
            return [line for line in self.daemon.log_lines[self.log_start:] if regex.search(line)]

        await self.daemon.wait_until(lambda: bool(found()), timeout, f"log line /{pattern}/")
        return found()[0]

    @contextlib.asynccontextmanager
    async def test(self) -> AsyncIterator[SharedDaemon]:
        """Around one test: the log part starts here; faults it scripted on the fake are
        cleared however it ends, so the next test starts with a well-behaved Telegram."""
        assert self.daemon.returncode is None, (
            f"the module's daemon exited ({self.daemon.returncode}) during an earlier test")
        self.log_start, self.calls_start = len(self.daemon.log_lines), len(self.fake.calls)
        try:
            yield self
        finally:
            self.fake.clear_faults()


class NewMessages:
    """What the shared fake agent received since the test started."""

    def __init__(self, env: SharedDaemon) -> None:
        self.journal = AgentJournal(env.tmp / "agent")
        self.start = len(self.journal.messages())

    def __call__(self) -> list[dict[str, Any]]:
        return self.journal.messages()[self.start:]


@contextlib.asynccontextmanager
async def shared_daemon(tmp: Path, fake: FakeTelegram,
                        config_path: Path) -> AsyncIterator[SharedDaemon]:
    """The daemon of a module-scoped fixture; at the end, the checks every run ends with."""
    daemon = Daemon(config_path)
    async with daemon:
        await started(daemon, fake)
        yield SharedDaemon(fake, daemon, tmp)
    assert daemon.returncode == 0, daemon.log[-2000:]
    assert_no_token(daemon, fake.token)
    assert "Traceback" not in daemon.log
