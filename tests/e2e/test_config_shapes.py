"""Settings that can never work, found before anything is started or asked over the network:
ids of a shape their platform never gives a person (a Telegram group, a lower-case or channel
Slack id), tokens of an impossible shape, every platform switched off, an agent command written
as one string, and a state_dir on a read-only mount. Each is one line naming the key and the
fix, the documented exit code, and never a secret."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from picobridge import exit_codes
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.harness import FAKE_AGENT, base_config, run_cli, write_config
from tests.storage_faults import small_filesystem

TOKEN = "5123456789:AAFakeTokenForPicobridgeTests_x7Qv0Lk3Zp9"
GROUP = -1001234567890


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("picobridge: ")]
    assert len(lines) == 1, err
    return lines[0]


def config_with(tmp: Path, **sections: Any) -> Path:
    config = base_config(tmp)
    config.update(sections)
    return write_config(tmp, config)


def config_line(out: str) -> str:
    return next(line for line in out.splitlines() if line[5:].startswith("config"))


async def test_a_telegram_group_id_is_not_a_user(tmp_path: Path) -> None:
    path = config_with(tmp_path, telegram={"token": TOKEN, "allowed_users": [42, GROUP]})
    for command in ("run", "access"):
        args = ("access", "list") if command == "access" else ("run",)
        code, _, err = await run_cli(*args, "--config", str(path))
        line = one_line(err)
        assert code == exit_codes.CONFIG, err
        assert "telegram.allowed_users: telegram user ids are positive" in line
        assert "group or channel" in line and "members one by one" in line
        assert f"got '{GROUP}'" in line
    code, out, _ = await run_cli("check", "--config", str(path))
    assert code == exit_codes.CONFIG and config_line(out).startswith("FAIL")
    assert "telegram user ids are positive" in config_line(out)
    assert "AAFake" not in out

    ok = config_with(tmp_path, telegram={"token": TOKEN})
    code, _, err = await run_cli("access", "allow", f"telegram:{GROUP}", "--config", str(ok))
    assert code == exit_codes.USAGE and "members one by one" in one_line(err)
    code, _, _ = await run_cli("access", "list", "--config", str(ok))
    assert code == exit_codes.OK
    assert not (tmp_path / "state" / "picobridge.db").exists(), "nothing was stored"


@pytest.mark.parametrize(("user", "expected"), [
    ("u0alice", "slack member ids are upper case (did you mean U0ALICE?)"),
    ("C0123ABCD", "that is a channel or conversation id, not a person's"),
    ("alice@example.com", "slack member ids are U or W and then capital letters"),
])
async def test_slack_ids_that_are_not_members(tmp_path: Path, user: str, expected: str) -> None:
    path = config_with(tmp_path, slack={"bot_token": "xoxb-1-x", "app_token": "xapp-1-y",
                                        "allowed_users": ["U0BOB", user]})
    code, _, err = await run_cli("sessions", "list", "--config", str(path))
    assert code == exit_codes.CONFIG and expected in one_line(err), err
    code, _, err = await run_cli("access", "allow", f"slack:{user}",
                                 "--config", str(config_with(tmp_path)))
    assert code == exit_codes.USAGE and expected in one_line(err), err


async def test_tokens_of_an_impossible_shape_cost_no_round_trip(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeSlack() as slack:
        cases = [
            ({"telegram": {"token": "AAFakeTokenWithoutItsBotNumber_x7Qv0Lk3Zp9",
                           "base_url": telegram.base_url}},
             "telegram.token does not look like a bot token"),
            ({"slack": {"bot_token": "xapp-1-A1-AAFakeAppToken", "app_token": "xapp-1-A1-x",
                        "base_url": slack.api_url}},
             "slack.bot_token must be the Bot User OAuth Token, which starts with xoxb-; this "
             "one starts with xapp-, so it belongs in slack.app_token"),
            ({"slack": {"bot_token": "xoxb-1-x", "app_token": "AAFakeAppTokenNoPrefix",
                        "base_url": slack.api_url}},
             "slack.app_token must be an App-Level Token, which starts with xapp-"),
        ]
        for sections, expected in cases:
            path = config_with(tmp_path, **sections)
            code, out, err = await run_cli("check", "--echo", "--config", str(path))
            assert code == exit_codes.CONFIG, out + err
            assert expected in config_line(out)
            code, _, err = await run_cli("run", "--config", str(path))
            assert code == exit_codes.CONFIG and expected in one_line(err)
            assert "AAFake" not in out + err
        assert telegram.calls == [] and slack.calls == []


async def test_every_platform_switched_off(tmp_path: Path) -> None:
    path = config_with(tmp_path,
                       telegram={"enabled": False, "token": TOKEN},
                       slack={"enabled": False, "bot_token": "xoxb-1-x",
                              "app_token": "xapp-1-y"})
    code, _, err = await run_cli("run", "--config", str(path))
    line = one_line(err)
    assert code == exit_codes.CONFIG
    assert "no platform is enabled: telegram.enabled = false and slack.enabled = false" in line
    assert "set telegram.token" not in line  # it is set
    code, out, _ = await run_cli("check", "--echo", "--config", str(path))
    # Everything else works: the configuration is what is wrong, as `run` says.
    assert code == exit_codes.CONFIG, out
    assert "FAIL platforms no platform is enabled: telegram.enabled = false" in out
    assert sum(line.startswith("FAIL") for line in out.splitlines()) == 1, out
    assert "AAFake" not in out


async def test_an_agent_command_written_as_one_string(tmp_path: Path) -> None:
    words = [sys.executable, str(FAKE_AGENT), "--state", str(tmp_path / "agent")]
    path = config_with(tmp_path, agent={"command": [" ".join(words)], "ready_timeout": 5})
    code, out, _ = await run_cli("check", "--config", str(path))
    agent = next(line for line in out.splitlines() if line[5:].startswith("agent"))
    assert agent.startswith("FAIL")
    assert ("agent.command is a list with one word per item, not one command line: "
            f"write {json.dumps(words)}") in agent
    code, _, err = await run_cli("chat", "--config", str(path), stdin=b"hi\n")
    assert code == exit_codes.AGENT and f"write {json.dumps(words)}" in one_line(err)


async def test_a_state_dir_on_a_read_only_mount(tmp_path: Path) -> None:
    path = write_config(tmp_path, base_config(tmp_path))
    with small_filesystem(tmp_path / "state", "8m") as state:
        code, _, err = await run_cli("migrate", "--config", str(path))
        assert code == 0, err
        await asyncio.to_thread(subprocess.run, ["mount", "-o", "remount,ro", str(state)],
                                check=True)
        for args in (("chat",), ("access", "allow", "telegram:42"), ("sessions", "reset", "x")):
            code, _, err = await run_cli(*args, "--config", str(path), stdin=b"hi\n")
            line = one_line(err)
            assert code == exit_codes.DATABASE, err
            assert "read-only filesystem: mount it read-write" in line, line
            assert "install -d" not in line and "chmod" not in line
        code, out, _ = await run_cli("check", "--echo", "--config", str(path))
        database = next(line for line in out.splitlines() if line.startswith("FAIL database"))
        assert "read-only filesystem" in database
