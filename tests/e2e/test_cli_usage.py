"""The command line as a newcomer meets it: help with descriptions and examples, options in
either place, choices checked, errors on stderr, `init`, the echo agent, a missing agent, and
`access list` in plain words."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from picobridge.adapters.registry import PLATFORMS
from picobridge.store.schema import available_migrations
from tests.harness import base_config, run_cli, write_config

COMMANDS = [("run",), ("chat",), ("check",), ("migrate",), ("health",), ("sessions",),
            ("sessions", "list"), ("sessions", "show"), ("sessions", "reset"), ("access",),
            ("access", "list"), ("access", "allow"), ("access", "deny"), ("init",),
            ("echo-agent",)]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
async def test_every_command_explains_itself_with_an_example(command: tuple[str, ...]) -> None:
    code, out, err = await run_cli(*command, "--help")
    assert code == 0 and err == ""
    usage, description, *_ = out.split("\n\n")
    assert usage.startswith(f"usage: picobridge {' '.join(command)}")
    assert len(description.split()) >= 8, f"no description: {out}"
    examples = out.split("examples:\n", 1)[1].splitlines()
    assert examples and all(line.lstrip().split()[0] in ("picobridge", "printf")
                            for line in examples if line.strip())
    assert any(f"picobridge {command[0]}" in line for line in examples), out


async def test_the_config_option_goes_before_or_after_the_command(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    expected = f"no chats yet (no database at {tmp_path / 'state' / 'picobridge.db'})\n"
    for args in (("--config", str(config), "sessions", "list"),
                 ("sessions", "list", "--config", str(config)),
                 ("sessions", "--config", str(config), "list")):
        code, out, err = await run_cli(*args)
        assert (code, out, err) == (0, expected, ""), args


async def test_choices_are_checked_and_errors_go_to_stderr(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, err = await run_cli("sessions", "list", "--platform", "irc",
                                   "--config", str(config))
    assert code == 2 and out == ""
    assert "invalid choice: 'irc'" in err and "'console'" in err and "'telegram'" in err
    code, out, err = await run_cli("sessions", "list", "--platform", "telegram",
                                   "--config", str(config))
    assert code == 0 and err == ""
    code, out, err = await run_cli("frobnicate")
    assert code == 2 and out == "" and "invalid choice: 'frobnicate'" in err


async def test_reading_commands_neither_create_nor_migrate_the_database(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    state = tmp_path / "state"
    for args in (("sessions", "list"), ("access", "list"), ("sessions", "show", "console:x")):
        code, _, _ = await run_cli(*args, "--config", str(config))
        assert code in (0, 1) and not state.exists(), args
    # A database one migration behind is reported, not upgraded behind the operator's back.
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    latest = available_migrations()[-1].version
    with sqlite3.connect(state / "picobridge.db") as db:
        db.execute("DELETE FROM schema_migrations WHERE version = ?", (latest,))
    for args in (("sessions", "list"), ("access", "list")):  # the store's, sqlite3's reads
        code, _, err = await run_cli(*args, "--config", str(config))
        assert code == 4 and "run `picobridge migrate`" in err, args
    with sqlite3.connect(state / "picobridge.db") as db:
        versions = {row[0] for row in db.execute("SELECT version FROM schema_migrations")}
    assert latest not in versions and versions


async def test_access_list_in_plain_words(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    path = write_config(tmp_path, config)
    code, out, _ = await run_cli("access", "list", "--config", str(path))
    assert code == 0
    # Every registered platform's allow list is named (adapters/registry.py), in its order.
    lists = " or ".join(f"{name}.allowed_users" for name in PLATFORMS)
    assert out == (f"nobody is allowed yet: list user ids in {lists}, or run "
                   "`picobridge access allow telegram:<user id>`\n")

    config["telegram"] = {"allowed_users": [111, 333]}
    path = write_config(tmp_path, config)
    for args in (("allow", "telegram:222"), ("deny", "telegram:333"), ("deny", "slack:U0BAD")):
        assert (await run_cli("access", *args, "--config", str(path)))[0] == 0
    code, out, _ = await run_cli("access", "list", "--config", str(path))
    lines = out.splitlines()
    assert lines[0] == "telegram:111\tallowed\t(config)"
    assert any(line.startswith("telegram:222\tallowed\t(granted ") for line in lines)
    assert any(line.startswith("telegram:333\tdenied\t(denied ") and "over the config" in line
               for line in lines)
    assert any(line.startswith("slack:U0BAD\tdenied\t(denied ") for line in lines)
    assert "granted" not in "".join(line for line in lines if "\tdenied\t" in line)
    assert not any(line.startswith("telegram:333\tallowed") for line in lines)


async def test_init_writes_a_private_commented_config_once(tmp_path: Path) -> None:
    target = tmp_path / "conf" / "picobridge.toml"
    code, out, err = await run_cli("init", str(target))
    assert code == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert f"picobridge chat --config {target} --echo" in out
    from picobridge.cli.init import example_config

    assert target.read_bytes() == example_config()
    target.write_text("# mine\n")
    code, out, err = await run_cli("init", str(target))
    assert code == 1 and out == "" and "exists" in err and "--force" in err
    assert target.read_text() == "# mine\n"
    target.chmod(0o644)
    code, _, _ = await run_cli("init", "--force", str(target))
    assert code == 0 and target.read_bytes() == example_config()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    # With PICOBRIDGE_CONFIG set, init writes there and chat finds it without --config.
    elsewhere = tmp_path / "env.toml"
    code, out, _ = await run_cli("init", env={"PICOBRIDGE_CONFIG": str(elsewhere)})
    assert code == 0 and elsewhere.exists() and "picobridge chat --echo" in out
    # The global --config names the file too.
    code, _, _ = await run_cli("--config", str(tmp_path / "global.toml"), "init")
    assert code == 0 and (tmp_path / "global.toml").read_bytes() == example_config()


async def test_a_missing_agent_names_where_it_comes_from_and_echo(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    del config["agent"]["command"]  # the default: picobot agent --json, not installed here
    path = write_config(tmp_path, config)
    env = {"PATH": "/usr/bin:/bin"}
    code, out, err = await run_cli("chat", "--config", str(path), stdin=b"hi\n", env=env)
    assert code == 6 and out == ""
    line = next(line for line in err.splitlines() if line.startswith("picobridge: "))
    assert "agent command not found: 'picobot'" in line
    assert "`pip install picobot` brings an unrelated program" in line
    assert "picobridge chat --echo" in line
    code, out, _ = await run_cli("check", "--config", str(path), env=env)
    agent = next(line for line in out.splitlines() if line.startswith("FAIL agent"))
    assert "unrelated program" in agent and "--echo" in agent
    # With --echo the same config works, and check says so.
    code, out, _ = await run_cli("check", "--echo", "--config", str(path), env=env)
    assert any(line.startswith("ok   agent     ready and answering pings") for line in
               out.splitlines()), out


async def test_chat_and_run_use_the_echo_agent(tmp_path: Path) -> None:
    path = write_config(tmp_path, base_config(tmp_path))
    code, out, err = await run_cli("chat", "--echo", "--config", str(path),
                                   stdin=b"hello\nWhat did I just say?\nmarkdown\n")
    assert code == 0, err
    assert out.startswith("echo: hello\nYou said: hello\n**Bold**, _italic_")
    # The configured (fake) agent was never started.
    assert not (tmp_path / "agent").exists()
    # The echo agent keeps its memory in its workspace: the session survives a restart.
    code, out, _ = await run_cli("chat", "--echo", "--config", str(path),
                                 stdin=b"What did I just say?\n")
    assert out == "You said: markdown\n"
    assert (tmp_path / "state" / "workspace" / "echo-agent-memory.json").is_file()
    assert os.environ.get("PICOBRIDGE_AGENT__COMMAND") is None
