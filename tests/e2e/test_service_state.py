"""The operator's first hour, through the real CLI: trying picobridge as root and then running
it as the service's user, and the state's privacy.

- The quick start as root leaves the service's folder alone (/var/lib/picobridge is used only
  once it exists): root's state goes to root's own state folder.
- State root made in the service's folder (a command run without `sudo -u`) is named with the
  one command that gives it back, never a crash, and that command fixes it.
- The state is private whatever the umask: folders 0700, the database and media 0600.

The cases with two users run as root, the second user being nobody (tests/e2e/unprivileged.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.e2e.unprivileged import NOBODY, picobridge, shared_dir, source_site
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, base_config, cli_env, picobridge_argv, run_cli, write_config

pytestmark = pytest.mark.timeout(300)
SERVICE_DIR = Path("/var/lib/picobridge")
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8


def nothing_of_a_service() -> None:
    assert not SERVICE_DIR.exists(), f"this machine has {SERVICE_DIR}: nothing to test"
    assert not Path("/etc/picobridge/config.toml").exists(), "this machine has a config"


def root_only() -> None:
    assert os.geteuid() == 0, "this case needs two users: run the suite as root (CI does)"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("picobridge: ")]
    assert len(lines) == 1, err
    return lines[0]


async def test_the_quick_start_as_root_leaves_the_service_folder_alone(tmp_path: Path) -> None:
    root_only()
    nothing_of_a_service()
    home = tmp_path / "root-home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_STATE_HOME": ""}
    config = tmp_path / "picobridge.toml"
    code, _, err = await run_cli("init", str(config), env=env)
    assert code == 0, err
    code, out, err = await run_cli("chat", "--config", str(config), "--echo", stdin=b"hi\n",
                                   env=env)
    assert (code, out) == (0, "echo: hi\n"), err
    own = home / ".local" / "state" / "picobridge"
    assert f"picobridge: created state_dir {own}" in err
    assert (own / "picobridge.db").is_file()
    code, _, err = await run_cli("access", "allow", "telegram:42", "--config", str(config),
                                 env=env)
    assert code == 0, err
    nothing_of_a_service()


def _service_state() -> tuple[Path, Path, Path]:
    """(home, state_dir, config) for nobody, in folders root made and nobody may reach."""
    shared = shared_dir("pb-service-")
    home = shared / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    state = shared / "state"
    config = write_config(shared, {"state_dir": str(state)}, "config.toml")
    config.chmod(0o644)
    return home, state, config


async def test_state_root_made_is_named_with_the_one_command_that_fixes_it() -> None:
    root_only()
    home, state, config = _service_state()
    # As root, by mistake: the folder and the database are root's.
    code, _, err = await run_cli("access", "allow", "telegram:42", "--config", str(config))
    assert code == 0, err
    assert (state / "picobridge.db").stat().st_uid == 0
    site = source_site()
    # Root's folder (private, 0700): all of it has to become the service's.
    done = picobridge(site, "migrate", "--config", str(config), home=home)
    assert done.returncode == 4 and f"`sudo chown -R nobody: {state}`" in one_line(done.stderr)
    # What `install -d -o picobridge` does to a folder that exists: its owner, not its files.
    os.chown(state, NOBODY, NOBODY)

    fixes = set()
    for args in (("access", "allow", "telegram:43"), ("migrate",), ("sessions", "list"),
                 ("sessions", "reset", "telegram:42"), ("chat", "--echo")):
        done = picobridge(site, *args, "--config", str(config), home=home, stdin="hi\n")
        line = one_line(done.stderr)
        assert done.returncode == 4, done.stderr
        assert f"state_dir {state} holds files of root that nobody cannot write" in line
        assert "picobridge.db" in line
        fixes.update(re.findall(r"`(chown -R [^`]+)`", line))
    checked = picobridge(site, "check", "--echo", "--config", str(config), home=home)
    database = next(line for line in checked.stdout.splitlines()
                    if line.startswith("FAIL database"))
    fixes.update(re.findall(r"`(chown -R [^`]+)`", database))
    assert fixes == {f"chown -R nobody: {state}"}

    # The one command, as root, and the service's user can use its state again.
    await asyncio.to_thread(subprocess.run, shlex.split(fixes.pop()), check=True)
    done = picobridge(site, "access", "allow", "telegram:43", "--config", str(config), home=home)
    assert done.returncode == 0, done.stderr
    done = picobridge(site, "chat", "--echo", "--config", str(config), home=home, stdin="hi\n")
    assert (done.returncode, done.stdout) == (0, "echo: hi\n"), done.stderr
    listed = picobridge(site, "access", "list", "--config", str(config), home=home)
    assert "telegram:42\tallowed" in listed.stdout and "telegram:43\tallowed" in listed.stdout

    # Someone who may look into another user's folder (here root's) is sent to its owner:
    # giving the owner's files away would lock the owner out.
    await asyncio.to_thread(subprocess.run, ["chown", "-R", "root:", str(state)], check=True)
    state.chmod(0o755)
    done = picobridge(site, "sessions", "list", "--config", str(config), home=home)
    line = one_line(done.stderr)
    assert done.returncode == 4 and f"state_dir {state} belongs to root" in line
    assert "run `sudo -u root picobridge sessions list" in line and "chown" not in line


class UmaskDaemon(Daemon):
    """`picobridge run` with umask 0, as under a careless shell or service manager."""

    async def start(self) -> UmaskDaemon:
        self.proc = await asyncio.create_subprocess_exec(
            *picobridge_argv(self.command, "--config", str(self.config_path)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=cli_env(self.env), umask=0)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [asyncio.create_task(self._collect(self.proc.stderr, self.log_lines)),
                         asyncio.create_task(self._collect(self.proc.stdout,
                                                           self.stdout_lines))]
        return self


async def test_the_state_is_private_whatever_the_umask(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with FakeTelegram() as fake, UmaskDaemon(telegram_config(tmp_path, fake)) as daemon:
        await started(daemon, fake)
        fake.user_photo(USER, USER, JPEG, caption="look", width=80, height=60)
        await reply_containing(fake, USER, "look")
    proc = await asyncio.create_subprocess_exec(
        *picobridge_argv("access", "allow", "telegram:42", "--config",
                         str(tmp_path / "config.toml")),
        env=cli_env(), umask=0, stdout=asyncio.subprocess.DEVNULL)
    assert await proc.wait() == 0
    media = state / "media"
    saved = [p for p in media.rglob("*") if p.is_file()]
    assert saved, "the photo was saved"
    folders = [state, state / "workspace", media, *(p for p in media.rglob("*") if p.is_dir())]
    files = [*saved, *(p for p in state.iterdir() if p.is_file())]
    assert {"picobridge.db", "picobridge.lock",
            "picobridge.db.access-changed"} <= {p.name for p in files}
    assert {str(p): oct(mode(p)) for p in folders} == {str(p): "0o700" for p in folders}
    assert {str(p): oct(mode(p)) for p in files} == {str(p): "0o600" for p in files}


def _exposed_config(tmp_path: Path, fake: FakeTelegram, file_mode: int) -> Path:
    config = telegram_config(tmp_path, fake)
    config.chmod(file_mode)
    return config


async def test_a_config_with_a_token_readable_by_everyone_is_warned_about(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = _exposed_config(tmp_path, fake, 0o644)
        code, out, _ = await run_cli("check", "--config", str(config))
        assert code == 0, out
        warning = next(line for line in out.splitlines() if line.startswith("WARN config"))
        assert f"config file {config} holds a token and every user may read it (mode 0644)"\
            in warning and f"`chmod o-r {config}`" in warning
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            assert any("holds a token and every user may read it" in line
                       for line in daemon.log_lines)
        assert fake.token not in out + daemon.log
        # Private, or without a token in it: nothing to say.
        config.chmod(0o640)
        code, out, _ = await run_cli("check", "--config", str(config))
        assert code == 0 and "WARN" not in out, out
        bare = write_config(tmp_path, base_config(tmp_path), "bare.toml")
        bare.chmod(0o644)
        code, out, _ = await run_cli("check", "--config", str(bare), env={
            "PICOBRIDGE_TELEGRAM__TOKEN": fake.token, "PICOBRIDGE_TELEGRAM__BASE_URL":
            fake.base_url, "PICOBRIDGE_TELEGRAM__RATE_LIMITER": "false"})
        assert code == 0 and "WARN" not in out, out


async def test_a_config_everyone_may_change_is_refused(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = _exposed_config(tmp_path, fake, 0o666)
        refusal = (f"config file {config} is writable by every user (mode 0666): anyone could "
                   "change agent.command, which picobridge runs")
        for command in ("run", "chat"):
            code, _, err = await run_cli(command, "--config", str(config), stdin=b"hi\n")
            assert code == 3 and refusal in one_line(err), err
        # Refused before anything started.
        assert fake.calls == []
        assert not (tmp_path / "state" / "picobridge.db").exists()
        code, out, _ = await run_cli("check", "--config", str(config))
        assert code == 3, out
        assert f"FAIL config    run would refuse to start: {refusal}" in out


async def test_an_agent_program_everyone_may_replace_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\nexec true\n")
    program.chmod(0o777)
    config = base_config(tmp_path)
    config["agent"]["command"] = [str(program)]
    path = write_config(tmp_path, config)
    refusal = f"the agent's program {program} is writable by every user"
    code, _, err = await run_cli("chat", "--config", str(path), stdin=b"hi\n")
    assert code == 3 and refusal in one_line(err), err
    code, out, _ = await run_cli("check", "--config", str(path))
    assert f"FAIL config    run would refuse to start: {refusal}" in out
