"""Shared pieces of the agent pool's end-to-end tests (test_agent_pool.py): the config of a
pool against a FakeTelegram, its workers' state as the daemon logs it, and a daemon with its
pool that several tests use in turn, each judging only what happened from its start on."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.telegram_support import assert_no_token, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, settle

READY = re.compile(r"agent ready pid=(\d+) worker=(\S+)")
DOWN = re.compile(r"worker (\S+): agent down \(")


def pool_config(tmp: Path, fake: FakeTelegram, chats: list[int], *flags: str,
                sections: dict[str, Any] | None = None, **agent: Any) -> Path:
    return telegram_config(tmp, fake, *flags, agent=agent, sections=sections,
                           allowed_users=chats)


def journal(tmp: Path) -> AgentJournal:
    return AgentJournal(tmp / "agent")


async def all_ready(daemon: Daemon, workers: int) -> None:
    await daemon.wait_until(lambda: len(READY.findall(daemon.log)) >= workers,
                            what=f"{workers} agent workers ready")


def ready_workers(lines: Iterable[str]) -> set[str]:
    """The workers whose last word in the log is that their agent is ready."""
    ready: dict[str, bool] = {}
    for line in lines:
        if found := READY.search(line):
            ready[found.group(2)] = True
        elif found := DOWN.search(line):
            ready[found.group(1)] = False
    return {name for name, up in ready.items() if up}


@dataclass
class Since:
    """What the agents and the daemon did from a test's start on."""

    journal: AgentJournal
    daemon: Daemon
    entry: int
    line: int

    def entries(self) -> list[dict[str, Any]]:
        return self.journal.entries()[self.entry:]

    def starts(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("event") == "start"]

    @property
    def log_lines(self) -> list[str]:
        return self.daemon.log_lines[self.line:]


@dataclass
class Pool:
    fake: FakeTelegram
    daemon: Daemon
    journal: AgentJournal
    workers: int
    db: Path

    async def settled(self) -> Since:
        """Once the pool is idle: every update taken, every message answered and its answer
        sent, every worker ready (a test before, failed midway, may have left turns running
        or a worker restarting); then what happens from now on."""
        await settle(self.db, lambda: not self.fake.pending_updates,
                     lambda: len(ready_workers(self.daemon.log_lines)) == self.workers)
        return Since(self.journal, self.daemon, len(self.journal.entries()),
                     len(self.daemon.log_lines))


@contextlib.asynccontextmanager
async def shared_pool(tmp: Path, chats: list[int], pool_size: int,
                      **agent: Any) -> AsyncIterator[Pool]:
    async with FakeTelegram() as fake:
        daemon = Daemon(pool_config(tmp, fake, chats, pool_size=pool_size, **agent))
        async with daemon:
            await started(daemon, fake)
            await all_ready(daemon, pool_size)
            yield Pool(fake, daemon, journal(tmp), pool_size, tmp / "state" / "picobridge.db")
        assert_no_token(daemon, fake.token)
        assert "Traceback" not in daemon.log
    # Looked at once the daemon had stopped: no answer came twice, not even after a test's
    # own checks.
    for chat in chats:
        assert len(set(fake.texts(chat))) == len(fake.texts(chat)), (chat, fake.texts(chat))
