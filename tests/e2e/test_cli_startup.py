"""The command line starts at once: each command imports only what it needs. Counted in
modules (sys.modules), not in milliseconds: a count is the same on a busy machine
and on a quiet one. bench/cli_startup.py gives the times."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from picobridge.cli.main import COMMANDS
from picobridge.cli.parser import build_parser
from tests.harness import REPO, cli_env, write_config

# What the console script `picobridge` runs (without its own `import re`), then the names in
# sys.modules written to the file named first. (-X importtime would miss the modules the
# command table loads with importlib.import_module: only `import` statements are timed.)
PROBE = """
import sys
from picobridge.cli import main
try:
    code = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
sys.exit(code)
"""
BARE = """
import sys
with open(sys.argv[1], "w") as out:
    out.write("\\n".join(sorted(sys.modules)))
"""

# Never for --version, --help, access, sessions or health: the platforms' libraries, the HTTP
# stack, the agent side, the core and the daemon's wiring.
DAEMON_ONLY = ("aiohttp", "telegram", "slack_sdk", "slack_bolt", "mautrix", "discord",
               "picobridge.agent.pool",
               "picobridge.agent.worker", "picobridge.core", "picobridge.cli.wiring",
               "picobridge.ops.http_server", "picobridge.adapters.telegram.adapter",
               "picobridge.adapters.slack.adapter")

# The contract's modules only the daemon's parts (and the store) use.
DAEMON_CONTRACT = ("picobridge.contract.messages", "picobridge.contract.dialogs",
                   "picobridge.contract.adapter", "picobridge.contract.link",
                   "picobridge.contract.commands", "picobridge.contract.sniff")

# --version: the package, its exit codes, the command table and its error type, and the
# few standard modules they touch (10 today). argparse alone would bring 21, asyncio 100.
VERSION_BOUND = 15
# access list reads the config (pydantic-settings, our config models, each platform's entry
# and the sections of the platforms the config names) and, once there is a database, the
# grants (asyncio comes with pydantic-settings): 42 modules beyond what `import
# pydantic_settings` loads today for a config naming no platform and no database yet, all but
# five (tomllib's four, pwd) ours; 53 with a database (sqlite3, the store's reading and
# schema modules). 70 leaves room for about 28 more of ours (a platform
# adds two, its package and its entry; its settings module only where a config names it), not
# for the store and the contract's message types (about 30 with aiosqlite and sqlite3) nor for
# any library: aiohttp alone is 104 modules, slack_sdk's async client 147,
# python-telegram-bot 308, the daemon's wiring 236.
ACCESS_LIST_OVER_PYDANTIC_SETTINGS = 70


def modules(tmp: Path, code: str, *args: str, exit_code: int = 0) -> set[str]:
    listing = tmp / "modules.txt"
    done = subprocess.run([sys.executable, "-c", code, str(listing), *args],
                          capture_output=True, text=True, env=cli_env(), cwd=REPO, timeout=60)
    assert done.returncode == exit_code, done.stderr[-2000:]
    return set(listing.read_text(encoding="utf-8").split("\n"))


def imported(tmp: Path, *words: str, exit_code: int = 0) -> list[str]:
    """The modules loaded by `picobridge WORDS`, beyond those of a bare interpreter."""
    return sorted(modules(tmp, PROBE, *words, exit_code=exit_code) - modules(tmp, BARE))


def daemon_modules(names: list[str]) -> list[str]:
    return [n for n in names if any(n == d or n.startswith(d + ".") for d in DAEMON_ONLY)]


def test_version_imports_next_to_nothing(tmp_path: Path) -> None:
    names = imported(tmp_path, "--version")
    assert "picobridge.cli.main" in names  # what is counted is the command line
    assert len(names) <= VERSION_BOUND, names
    assert "argparse" not in names and not daemon_modules(names), names


def test_access_list_reads_the_config_without_the_daemon(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state")})
    names = imported(tmp_path, "access", "list", "--config", str(config))
    assert "picobridge.cli.admin" in names and "pydantic_settings" in names
    assert not daemon_modules(names), daemon_modules(names)
    # No database yet: nothing to read, so neither the store nor SQLite is loaded, nor the
    # contract's message types and adapter interface (the platforms' entries need only
    # contract.platform and contract.names).
    assert not [n for n in names if n.split(".")[0] in ("aiosqlite", "sqlite3")
                or n.startswith("picobridge.store") or n in DAEMON_CONTRACT], names
    # The config names no platform: no platform's section model is loaded, only their entries.
    assert "picobridge.adapters.telegram.platform" in names
    assert not [n for n in names if n.endswith(".settings") and ".adapters." in n], names
    baseline = modules(tmp_path, BARE.replace("import sys", "import sys, pydantic_settings"))
    assert len(set(names) - set(baseline)) <= ACCESS_LIST_OVER_PYDANTIC_SETTINGS, (
        sorted(set(names) - set(baseline)))


@pytest.mark.parametrize("command", ["access", "sessions"])
def test_a_listing_reads_the_database_with_sqlite3_alone(tmp_path: Path, command: str) -> None:
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state")})
    modules(tmp_path, PROBE, "access", "allow", "telegram:7", "--config", str(config))
    names = imported(tmp_path, command, "list", "--config", str(config))
    assert {"sqlite3", "picobridge.store.reading"} <= set(names)
    # Not the daemon's store: aiosqlite (and its thread), the table groups, the message types.
    assert not [n for n in names if n.split(".")[0] == "aiosqlite" or n in DAEMON_CONTRACT
                or n in ("picobridge.store.store", "picobridge.store.connection")], names


def test_access_list_loads_the_section_of_the_platform_the_config_names(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state"),
                                     "telegram": {"allowed_users": [7]}})
    names = imported(tmp_path, "access", "list", "--config", str(config))
    assert [n for n in names if n.endswith(".settings") and ".adapters." in n] == [
        "picobridge.adapters.telegram.settings"]


@pytest.mark.parametrize(("words", "exit_code"), [
    (["--help"], 0), (["access", "--help"], 0), (["sessions", "list"], 0),
    # Nothing listens there: the health probe fails, having imported what it needs.
    (["health"], 1)])
def test_the_operators_commands_leave_the_daemon_out(tmp_path: Path, words: list[str],
                                                     exit_code: int) -> None:
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state"),
                                     "http": {"listen": "127.0.0.1:9"}})
    names = imported(tmp_path, *words, "--config", str(config), exit_code=exit_code)
    assert "picobridge.cli.parser" in names and not daemon_modules(names), daemon_modules(names)


def test_every_command_has_its_line_in_the_table() -> None:
    # A command added to the parser but not to COMMANDS would fail only when typed.
    [commands] = [a for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction)]
    assert sorted(commands.choices) == sorted(COMMANDS)
    for target in COMMANDS.values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), target


# Loaded only by a daemon with a listener (http.listen): aiohttp's server, prometheus_client
# and the routes that use them (bench/memory.py: about 3 MB of a Telegram-only daemon's RSS).
LISTENER_ONLY = ("aiohttp.web", "prometheus_client", "picobridge.ops.endpoints",
                 "picobridge.ops.http_server", "picobridge.ops.listener_guard")


def chat_modules(tmp: Path, config: dict[str, object]) -> list[str]:
    """The modules `picobridge chat --echo` (the daemon's wiring, the console) has loaded
    when it exits after answering one line."""
    listing = tmp / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(listing), "chat", "--echo", "--config",
         str(write_config(tmp, config))],
        input="hello\n", capture_output=True, text=True, env=cli_env(), cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hello" in done.stdout, done.stdout  # the echo agent answered through the bridge
    names = listing.read_text(encoding="utf-8").split("\n")
    return [n for n in names if any(n == d or n.startswith(d + ".") for d in LISTENER_ONLY)]


def test_a_daemon_without_a_listener_leaves_the_http_server_and_metrics_out(
        tmp_path: Path) -> None:
    assert chat_modules(tmp_path, {"state_dir": str(tmp_path / "state")}) == []


def test_a_daemon_with_a_listener_loads_them(tmp_path: Path) -> None:
    loaded = chat_modules(tmp_path, {"state_dir": str(tmp_path / "state"),
                                     "http": {"listen": "127.0.0.1:0"}})
    assert {"prometheus_client", "picobridge.ops.endpoints", "aiohttp.web"} <= set(loaded)
