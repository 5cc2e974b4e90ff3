"""Shared pieces of the Matrix end-to-end tests: one real Synapse per test process (pytest-xdist
worker), the bot's account and config for `picobridge run`, people, and checks every run ends
with. Every test registers its own accounts and makes its own rooms, so tests that share the
server share nothing else; a test that restarts the homeserver starts its own."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Daemon, base_config, write_config
from tests.synapse.install import ensure
from tests.synapse.person import Person
from tests.synapse.server import Account, Synapse


def start_synapse(directory: Path) -> Synapse:
    server = Synapse(ensure(), directory).start()
    print(f"synapse started in {server.start_seconds:.2f}s", file=sys.stderr)
    return server


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    server = start_synapse(tmp_path_factory.mktemp("synapse"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_synapse(tmp_path: Path) -> Iterator[Synapse]:
    """A homeserver of the test's own, for tests that stop or restart it."""
    server = start_synapse(tmp_path / "synapse")
    try:
        yield server
    finally:
        server.stop()


def matrix_config(tmp: Path, server: Synapse, bot: Account, allowed: list[str],
                  *agent_flags: str, agent: dict[str, Any] | None = None,
                  sections: dict[str, Any] | None = None, **matrix: Any) -> Path:
    config = base_config(tmp, *agent_flags, **(agent or {}))
    config.update(sections or {})
    config["matrix"] = {
        "homeserver": server.url,
        "user_id": bot.user_id,
        "access_token": bot.access_token,
        "allowed_users": allowed,
        "sync_timeout": 5,
        **matrix,
    }
    config["matrix"] = {k: v for k, v in config["matrix"].items() if v is not None}
    return write_config(tmp, config)


def person(server: Synapse, account: Account | None = None) -> Person:
    return Person(server.url, account or server.register())


async def synced(daemon: Daemon) -> None:
    """The daemon has made its first sync: what people send from now on is answered."""
    await daemon.wait_for_log(r"platform matrix connected", timeout=60)


def assert_no_secrets(daemon: Daemon, *accounts: Account) -> None:
    for line in daemon.log_lines + daemon.stdout_lines:
        for account in accounts:
            assert account.access_token not in line, f"a token leaked: {line[:200]!r}"
            assert account.password not in line, f"a password leaked: {line[:200]!r}"


def body(event: dict[str, Any]) -> str:
    return str(event.get("content", {}).get("body", ""))


@dataclass
class Shared:
    """One daemon (and its bot) serving a module's tests: each test talks as its own people
    (`people[role]`, allowed by the config), in rooms it makes."""

    server: Synapse
    bot: Account
    daemon: Daemon
    config: Path
    tmp: Path  # the daemon's folder: state, the fake agent's state and workspace
    people: dict[str, Account]


@contextlib.asynccontextmanager
async def shared_daemon(tmp: Path, server: Synapse, roles: list[str], *agent_flags: str,
                        **options: Any) -> AsyncIterator[Shared]:
    """`picobridge run` for a module, synced; at the end, the checks every run ends with."""
    bot = server.register()
    people = {role: server.register() for role in roles}
    config = matrix_config(tmp, server, bot, [a.user_id for a in people.values()],
                           *agent_flags, **options)
    daemon = Daemon(config)
    async with daemon:
        await synced(daemon)
        yield Shared(server, bot, daemon, config, tmp, people)
    assert_no_secrets(daemon, bot, *people.values())
    assert "Traceback" not in daemon.log

