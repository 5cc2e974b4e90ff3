"""Who runs picobridge and whose files it meets: a normal user without a config, a state_dir
the user cannot use, root in the service user's state_dir, and an access marker root left
behind. Each case gets one clear line naming the path and the fix, never a traceback.

The commands run as an unprivileged user (nobody when the tests run as root, as in CI); the
cases with two users need root to make the other user's files.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.e2e.unprivileged import (
    NOBODY,
    as_user,
    dependencies_site,
    give_to_user,
    interpreter,
    picobridge,
    shared_dir,
    source_site,
)
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, cli_env, run_cli, write_config

pytestmark = pytest.mark.timeout(300)
STRANGER = 9999


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("picobridge: ")]
    assert len(lines) == 1, err
    return lines[0]


def root_only() -> None:
    assert os.geteuid() == 0, "this case needs two users: run the suite as root (CI does)"


@pytest.fixture
def home() -> Path:
    home = shared_dir("pb-home-") / "home"
    home.mkdir()
    give_to_user(home)
    return home


def test_a_normal_user_without_a_config_gets_a_state_dir_of_their_own(home: Path) -> None:
    assert not Path("/etc/picobridge/config.toml").exists(), "this machine has a config"
    site = source_site()
    state = home / ".local" / "state" / "picobridge"

    listed = picobridge(site, "sessions", "list", home=home)
    assert (listed.returncode, listed.stdout) == (0, f"no chats yet (no database at "
                                                     f"{state / 'picobridge.db'})\n")
    allowed = picobridge(site, "access", "list", home=home)
    assert allowed.returncode == 0 and allowed.stdout.startswith("nobody is allowed yet")
    # Reading created nothing.
    assert not state.exists()

    chat = picobridge(site, "chat", "--echo", home=home, stdin="hi there\n")
    assert (chat.returncode, chat.stdout) == (0, "echo: hi there\n"), chat.stderr
    assert f"picobridge: created state_dir {state}" in chat.stderr
    listed = picobridge(site, "sessions", "list", home=home)
    assert listed.returncode == 0 and listed.stdout.startswith("console:local\t")
    # XDG_STATE_HOME wins over ~/.local/state when set.
    xdg = picobridge(site, "sessions", "list", home=home,
                     env={"XDG_STATE_HOME": str(home / "xdg")})
    assert str(home / "xdg" / "picobridge" / "picobridge.db") in xdg.stdout


def _locked_state_dir() -> Path:
    """A state_dir inside a folder the unprivileged user may not enter."""
    locked = shared_dir("pb-locked-") / "locked"
    locked.mkdir(mode=0o700)
    if os.geteuid() != 0:
        locked.chmod(0)
    return locked / "state"


@pytest.mark.parametrize("args", [
    ("chat", "--echo"), ("migrate",), ("sessions", "list"), ("sessions", "reset", "x:1"),
    ("access", "list"), ("access", "allow", "telegram:1"),
])
def test_a_state_dir_the_user_cannot_enter(home: Path, args: tuple[str, ...]) -> None:
    state = _locked_state_dir()
    config = write_config(home, {"state_dir": str(state)}, "pb.toml")
    config.chmod(0o644)
    done = picobridge(source_site(), *args, "--config", str(config), home=home, stdin="hi\n")
    line = one_line(done.stderr)
    assert done.returncode == 4, done.stderr
    assert f"cannot use state_dir {state}: Permission denied" in line
    assert f"{state.parent} does not let" in line and "set state_dir" in line


def test_check_on_a_state_dir_the_user_cannot_enter(home: Path) -> None:
    state = _locked_state_dir()
    config = write_config(home, {"state_dir": str(state)}, "pb.toml")
    config.chmod(0o644)
    done = picobridge(source_site(), "check", "--echo", "--config", str(config), home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    database = next(line for line in lines if line.startswith("FAIL database"))
    assert "Permission denied" in database and f"{state.parent} does not let" in database
    agent = next(line for line in lines if line[5:].startswith("agent"))
    # The agent is not blamed for the folder it could not be given.
    assert agent.startswith("FAIL agent") and "working directory" in agent
    assert "not executable" not in agent


async def test_root_is_sent_to_the_user_who_owns_the_state_dir(tmp_path: Path) -> None:
    root_only()
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, NOBODY, NOBODY)
    config = write_config(tmp_path, {"state_dir": str(state)})
    code, _, err = await run_cli("access", "allow", "telegram:42", "--config", str(config))
    assert code == 4
    assert (f"run `sudo -u nobody picobridge access allow telegram:42 --config {config}`"
            in one_line(err))
    code, _, err = await run_cli("--config", str(config), "chat", "--echo", stdin=b"hi\n")
    assert code == 4 and "sudo -u nobody picobridge --config" in one_line(err)
    code, out, _ = await run_cli("check", "--echo", "--config", str(config))
    assert code == 1 and "FAIL database  state_dir" in out and "belongs to nobody" in out
    # Root left nothing behind in the other user's folder.
    assert list(state.iterdir()) == []


class UserDaemon(Daemon):
    """`picobridge run` as the unprivileged user, from the shared copy of this checkout."""

    async def start(self) -> UserDaemon:
        env = cli_env({"PYTHONPATH": f"{source_site()}:{dependencies_site()}",
                       "HOME": str(self.config_path.parent)})
        argv = as_user([interpreter(), "-S", "-m", "picobridge", self.command, "--echo",
                        "--config", str(self.config_path)])
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=self.config_path.parent)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [asyncio.create_task(self._collect(self.proc.stderr, self.log_lines)),
                         asyncio.create_task(self._collect(self.proc.stdout,
                                                           self.stdout_lines))]
        return self


async def test_a_grant_reaches_the_daemon_though_root_once_left_the_marker(home: Path) -> None:
    root_only()
    state = home / "state"
    async with FakeTelegram() as fake:
        config = write_config(home, {
            "state_dir": str(state), "log": {"level": "DEBUG"},
            "agent": {"ping_interval": 1, "ping_timeout": 2, "shutdown_timeout": 3},
            "telegram": {"token": fake.token, "base_url": fake.base_url,
                         "base_file_url": fake.base_file_url, "rate_limiter": False}})
        config.chmod(0o644)
        async with UserDaemon(config) as daemon:
            await daemon.wait_for_log(r"connected to Telegram as @")
            await fake.wait_for_poll(timeout=20)
            # What `sudo picobridge access allow ...` left before picobridge refused root.
            marker = state / "picobridge.db.access-changed"
            marker.touch()
            os.chown(marker, 0, 0)
            marker.chmod(0o644)
            fake.user_message(STRANGER, STRANGER, "let me in")
            await fake.wait_for(lambda: len(fake.sent_messages(STRANGER)) == 1, "the denial")

            done = await asyncio.to_thread(
                picobridge, source_site(), "access", "allow", f"telegram:{STRANGER}",
                "--config", str(config), home=home)
            assert done.returncode == 0, done.stderr
            assert "Traceback" not in done.stderr
            fake.user_message(STRANGER, STRANGER, "now?")
            await fake.wait_for(lambda: any("echo: now?" in (m.text or "")
                                            for m in fake.sent_messages(STRANGER)),
                                "the echo agent's answer to the newly allowed user")
    assert marker.stat().st_uid == NOBODY


async def test_an_unforeseen_error_is_one_line_with_its_own_exit_code(tmp_path: Path) -> None:
    """A database whose tables were dropped behind picobridge's back: nothing foresees that,
    and the last-resort handler still gives one line and exit 70."""
    import sqlite3

    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state")})
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    with sqlite3.connect(tmp_path / "state" / "picobridge.db") as db:
        db.execute("DROP TABLE chats")
    code, out, err = await run_cli("sessions", "list", "--config", str(config))
    assert code == 70 and out == ""
    line = one_line(err)
    assert "unexpected error: OperationalError: no such table: chats" in line
    assert "PICOBRIDGE_LOG__LEVEL=DEBUG" in line
    # Asked for, the traceback is there.
    code, _, err = await run_cli("sessions", "list", "--config", str(config),
                                 env={"PICOBRIDGE_LOG__LEVEL": "DEBUG"})
    assert code == 70 and "Traceback" in err and "no such table: chats" in err
    # The daemon always logs the traceback (its log is where an operator looks), then the line.
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state"), "telegram": {
        "token": "5123456789:AAFakeTokenForPicobridgeTests_x7Qv0Lk3Zp9",
        "base_url": "http://127.0.0.1:9/bot"}})
    code, _, err = await run_cli("run", "--echo", "--config", str(config))
    assert code == 70 and "Traceback" in err
    assert err.splitlines()[-1].startswith("picobridge: unexpected error: OperationalError")
    assert "AAFake" not in err
