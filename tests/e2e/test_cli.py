"""The operator's command line: check, run without platforms, migrate, sessions, access."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from picobridge.store.schema import latest_version
from tests.fakes.telegram import FakeTelegram
from tests.harness import base_config, run_cli, write_config

TOKEN = "5123456789:AAFakeTokenForCheckTests_x7Qv0Lk3Zp9abc"


async def test_check_passes_and_never_prints_the_token(tmp_path: Path) -> None:
    async with FakeTelegram(token=TOKEN) as fake:
        config = base_config(tmp_path)
        config["telegram"] = {"token": TOKEN, "base_url": fake.base_url,
                              "base_file_url": fake.base_file_url}
        path = write_config(tmp_path, config)
        code, out, err = await run_cli("check", "--config", str(path))
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("ok   config")
    assert any(line.startswith("ok   database") for line in lines)
    assert any(line.startswith("ok   agent     ready and answering pings") for line in lines)
    assert any(line.startswith("ok   telegram") and "@picobridge_test_bot" in line
               for line in lines)
    assert any(line.startswith("--   slack     disabled") for line in lines)
    assert TOKEN not in out + err and "AAFake" not in out + err


async def test_check_names_a_missing_agent_and_a_dead_platform(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    config["agent"]["command"] = ["/nonexistent/picobot", "agent", "--json"]
    # Nothing listens on port 9: the platform check must fail without leaking the token.
    config["telegram"] = {"token": TOKEN, "base_url": "http://127.0.0.1:9/bot"}
    code, out, err = await run_cli("check", "--config", str(write_config(tmp_path, config)))
    assert code == 1
    assert "FAIL agent     agent command not found: '/nonexistent/picobot'" in out
    assert any(line.startswith("FAIL telegram") for line in out.splitlines())
    assert TOKEN not in out + err and "AAFake" not in out + err


async def test_check_reports_a_misspelled_key(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[telegram]\ntokn = "{TOKEN}"\n', encoding="utf-8")
    code, out, err = await run_cli("check", "--config", str(path))
    assert code == 3  # a config error, as for every other command
    assert "unknown key 'telegram.tokn' (did you mean 'telegram.token'?)" in out
    assert str(path) in out
    assert TOKEN not in out + err


async def test_run_without_a_platform_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, _, err = await run_cli("run", "--config", str(config))
    assert code == 3
    assert "no platform is enabled" in err
    assert "Traceback" not in err


async def test_bad_config_exit_code_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[agent]\nping_interval = 'soon'\n", encoding="utf-8")
    code, _, err = await run_cli("run", "--config", str(path))
    assert code == 3
    assert err.startswith("picobridge: config error:") and "agent.ping_interval" in err
    assert "Traceback" not in err


async def test_migrate_and_a_database_from_the_future(tmp_path: Path) -> None:
    path = write_config(tmp_path, base_config(tmp_path))
    code, out, _ = await run_cli("migrate", "--config", str(path))
    latest = latest_version()
    assert code == 0 and f"schema version {latest}" in out
    with sqlite3.connect(tmp_path / "state" / "picobridge.db") as db:
        db.execute("INSERT INTO schema_migrations VALUES (99, 'future', 0)")
    code, _, err = await run_cli("chat", "--config", str(path), stdin=b"hi\n")
    assert code == 4
    assert "newer than this picobridge" in err
    code, out, _ = await run_cli("check", "--config", str(path))
    assert code == 1 and "FAIL database" in out


async def test_access_commands(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    config["telegram"] = {"allowed_users": [111]}
    path = write_config(tmp_path, config)
    assert (await run_cli("access", "allow", "telegram:222", "--config", str(path)))[0] == 0
    assert (await run_cli("access", "deny", "slack:U0BAD", "--config", str(path)))[0] == 0
    code, out, _ = await run_cli("access", "list", "--config", str(path))
    assert code == 0
    assert "telegram:111\tallowed\t(config)" in out
    assert "telegram:222\tallowed" in out and "slack:U0BAD\tdenied" in out
    code, _, err = await run_cli("access", "allow", "telegram:abc", "--config", str(path))
    assert code == 2 and "telegram user ids are numbers" in err
    code, _, err = await run_cli("access", "allow", "irc:bob", "--config", str(path))
    assert code == 2 and "platform one of telegram, slack" in err


async def test_sessions_commands(tmp_path: Path) -> None:
    path = write_config(tmp_path, base_config(tmp_path))
    assert (await run_cli("chat", "--config", str(path), stdin=b"remember me\n"))[0] == 0
    code, out, _ = await run_cli("sessions", "list", "--config", str(path))
    assert code == 0 and out.startswith("console:local\tconsole.local.")
    old_session = out.split("\t")[1]
    code, out, _ = await run_cli("sessions", "reset", "console:local", "--config", str(path))
    assert code == 0 and out.startswith("console:local: new session console.local.")
    new_session = out.strip().rsplit(" ", 1)[1]
    assert new_session != old_session
    code, out, _ = await run_cli("sessions", "show", old_session, "--config", str(path))
    assert code == 0 and f"{new_session} (current)" in out and old_session in out
    # The reset took: the agent no longer remembers.
    _, out, _ = await run_cli("chat", "--config", str(path), stdin=b"What did I just say?\n")
    assert out == "You have not said anything yet.\n"
    code, _, err = await run_cli("sessions", "show", "telegram:404", "--config", str(path))
    assert code == 1 and "no chat or session" in err


async def test_version_and_help() -> None:
    code, out, _ = await run_cli("--version")
    assert code == 0 and out.startswith("picobridge ")
    code, out, _ = await run_cli("--help")
    assert code == 0
    for command in ("run", "chat", "check", "migrate", "sessions", "access", "health"):
        assert command in out
