"""Operator mistakes through the real CLI: one clear line, its documented exit code, never a
traceback and never a secret."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import base_config, run_cli, write_config

TOKEN = "5123456789:AAFakeTokenForPicobridgeTests_x7Qv0Lk3Zp9"


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("picobridge: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


async def test_a_config_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"state_dir = '/tmp/\xff\xfe'\n")
    code, _, err = await run_cli("chat", "--config", str(path))
    assert code == 3 and "is not UTF-8 text" in one_line(err)


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("PICOBRIDGE_TELEGRAM__ALLOWED_USERS", "[123",
     "PICOBRIDGE_TELEGRAM__ALLOWED_USERS is not valid JSON"),
    ("PICOBRIDGE_AGENT__COMMAND", "picobot agent",
     "PICOBRIDGE_AGENT__COMMAND is not valid JSON"),
    ("PICOBRIDGE_AGENT__PING_INTERVAL", "soon",
     "agent.ping_interval (PICOBRIDGE_AGENT__PING_INTERVAL): Input should be a valid number"),
    ("PICOBRIDGE_TELEGRAM_TOKEN", TOKEN,
     "unknown environment variable PICOBRIDGE_TELEGRAM_TOKEN "
     "(did you mean PICOBRIDGE_TELEGRAM__TOKEN?)"),
])
async def test_environment_mistakes(tmp_path: Path, name: str, value: str,
                                    expected: str) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, err = await run_cli("chat", "--config", str(config), env={name: value})
    assert code == 3 and expected in one_line(err)
    assert "AAFake" not in out + err


async def test_a_credential_that_is_not_utf8(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "telegram_token").write_bytes(b"\xff\xfe not text")
    config = write_config(tmp_path, base_config(tmp_path))
    code, _, err = await run_cli("run", "--config", str(config),
                                 env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert code == 3
    assert "cannot read credential telegram_token" in one_line(err)


async def test_the_listener_port_taken_or_an_impossible_host(tmp_path: Path,
                                                            taken_port: int) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    # A port in use may come free (a restart helps: 7); a host that is not ours never (3).
    for listen, reason, exit_code in (
            (f"127.0.0.1:{taken_port}", "address already in use", 7),
            ("256.1.1.1:80", "http.listen 256.1.1.1:80", 3)):
        code, _, err = await run_cli("chat", "--config", str(config), stdin=b"",
                                     env={"PICOBRIDGE_HTTP__LISTEN": listen,
                                          "PICOBRIDGE_HTTP__LISTEN_RETRY": "0"})
        assert code == exit_code, err
        assert reason in one_line(err).lower()


async def test_the_database_path_is_a_directory(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    (tmp_path / "state" / "picobridge.db").mkdir(parents=True)
    code, _, err = await run_cli("chat", "--config", str(config), stdin=b"")
    assert code == 4 and "it is a directory" in one_line(err)
    assert "Event loop is closed" not in err
    code, _, err = await run_cli("access", "list", "--config", str(config))
    assert code == 4 and "it is a directory" in one_line(err)
    code, out, _ = await run_cli("check", "--config", str(config))
    assert code == 1 and "FAIL database" in out and "is a directory" in out


async def test_the_state_dir_is_a_file(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    state = tmp_path / "state"
    state.write_text("not a folder")
    path = write_config(tmp_path, config)
    code, out, _ = await run_cli("check", "--config", str(path))
    assert code == 1 and f"FAIL database  state_dir {state}" in out
    code, _, err = await run_cli("chat", "--config", str(path), stdin=b"")
    assert code == 4 and "is a file, not a directory" in one_line(err)


async def test_health_with_a_url_that_is_not_one(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_config(tmp_path))
    code, out, err = await run_cli("health", "--url", "notaurl", "--config", str(config))
    assert code == 2 and out == ""
    assert "--url must be an http:// or https:// URL" in one_line(err)


async def test_a_proxy_of_an_unknown_kind(tmp_path: Path) -> None:
    config = base_config(tmp_path)
    config["telegram"] = {"token": TOKEN, "proxy_url": "ftp://127.0.0.1:9"}
    code, out, err = await run_cli("run", "--config", str(write_config(tmp_path, config)))
    assert code == 3 and "telegram.proxy_url must start with one of" in one_line(err)
    assert "AAFake" not in out + err


async def test_a_read_only_state_dir_is_refused_at_start(tmp_path: Path) -> None:
    from tests.storage_faults import small_filesystem

    config = write_config(tmp_path, base_config(tmp_path))
    with small_filesystem(tmp_path / "state", "8m") as state:
        code, _, err = await run_cli("migrate", "--config", str(config))
        assert code == 0, err
        (state / "picobridge.lock").unlink(missing_ok=True)
        await asyncio.to_thread(subprocess.run, ["mount", "-o", "remount,ro", str(state)],
                                check=True)
        code, out, _ = await run_cli("check", "--config", str(config))
        assert code == 1 and "FAIL database" in out
        code, _, err = await run_cli("chat", "--config", str(config), stdin=b"hello\n")
        # Refused at once with one line, not at the first message.
        assert code == 4 and str(state) in one_line(err)
