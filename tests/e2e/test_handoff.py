"""`picobridge run` validates its configuration, then re-executes itself as the daemon proper
(cli/handoff.py): one process throughout (the pid systemd, Docker and `kill` know), which never
maps pydantic, gets its settings only through a pipe it closes, and still acts on a SIGTERM
that comes while it becomes the daemon."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import struct
import sys
import sysconfig
import tomllib
from collections.abc import Callable
from pathlib import Path

import picobridge
from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import REPO, WAIT, Daemon, cli_env, run_cli, write_config

DAEMON_PROPER = b"picobridge.cli.handoff"


def cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


async def until(daemon: Daemon, seen: Callable[[int], bool]) -> int:
    """The pid, once `seen(pid)`. Looked at often: there is no event for an exec or a
    change of signal mask."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    async with asyncio.timeout(WAIT):
        while not seen(pid):
            assert daemon.proc.returncode is None, daemon.log
            await asyncio.sleep(0.001)
    return pid


async def until_daemon_proper(daemon: Daemon) -> int:
    return await until(daemon, lambda pid: any(DAEMON_PROPER in arg for arg in cmdline(pid)))


def blocked(pid: int) -> set[signal.Signals]:
    """The signals process `pid` holds blocked (SigBlk in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            mask = int(line.split()[1], 16)
            return {sig for sig in signal.Signals if mask & (1 << (sig - 1))}
    raise AssertionError(f"no SigBlk in /proc/{pid}/status")


def pipes(pid: int, fds: range | None = None) -> set[str]:
    """The pipes process `pid` holds open (their `pipe:[inode]`), of `fds` if given."""
    found = set()
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        if fds is not None and int(entry.name) not in fds:
            continue
        try:
            target = os.readlink(entry)
        except FileNotFoundError:  # closed while listed
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


def mapped(pid: int) -> list[str]:
    """The files process `pid` has mapped (/proc/PID/maps: its shared objects)."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in lines if len(line.split()) == 6})


def holding(pid: int, secret: bytes, state: Path) -> list[str]:
    """Where `secret` is found: the process's argv or environment, a file under `state`."""
    found = [name for name in ("cmdline", "environ")
             if secret in Path(f"/proc/{pid}/{name}").read_bytes()]
    return found + [str(p) for p in state.rglob("*") if p.is_file() and secret in p.read_bytes()]


def with_agent(config: Path, command: list[str]) -> Path:
    """A copy of `config` (same state_dir) with another agent.command."""
    tables = tomllib.loads(config.read_text(encoding="utf-8"))
    tables["agent"]["command"] = command
    return write_config(config.parent, tables, "second.toml")


class CredentialedNotifySocket:
    """systemd's notify socket, which learns who sent each datagram (SO_PASSCRED) as systemd
    does for NotifyAccess=main."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(str(path))
        self.sock.setblocking(False)

    async def until(self, prefix: str) -> tuple[str, int]:
        """The first datagram starting with `prefix`, and the pid that sent it."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(WAIT):
            while True:
                ready = loop.create_future()
                loop.add_reader(self.sock, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_reader(self.sock)
                data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
                pid = next(struct.unpack("3i", cmsg[2][:12])[0] for cmsg in ancillary
                           if cmsg[:2] == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS))
                if data.decode().startswith(prefix):
                    return data.decode(), pid

    def close(self) -> None:
        self.sock.close()


async def test_run_becomes_a_daemon_without_pydantic_in_the_same_process(tmp_path: Path) -> None:
    notify = CredentialedNotifySocket(tmp_path / "notify.sock")
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        try:
            async with Daemon(config, env={"NOTIFY_SOCKET": str(notify.path)}) as daemon:
                pid = await until_daemon_proper(daemon)
                text, sender = await notify.until("READY=1")
                await started(daemon, fake)
                fake.user_message(USER, USER, "still there?")
                await reply_containing(fake, USER, "echo: still there?")

                # One process: the pid started is the one serving and telling systemd.
                assert sender == pid and "telegram up" in text
                # `ps` shows the daemon proper and what was typed; -P: no import from the
                # working directory.
                assert cmdline(pid)[-4:-1] == [b"run", b"--config", str(config).encode()]
                assert b"-P" in cmdline(pid)
                # Its stdin, stdout and stderr are still the pipes this test started it with.
                assert len(pipes(pid, range(3))) == 3 and pipes(pid, range(3)) <= pipes(os.getpid())
                maps = mapped(pid)
                assert any("_sqlite3" in m for m in maps)  # what the daemon uses is seen here
                assert [m for m in maps if "pydantic" in m] == []
                # The settings came through no argv, environment or file of the daemon's.
                assert holding(pid, fake.token.encode(), tmp_path / "state") == []

                # The handoff pipe is closed and went to no agent: every pipe the daemon
                # holds beyond its own stdio is one of its agent's stdin, stdout or stderr.
                agent = int(re.search(r"agent started pid=(\d+)",
                                      daemon.log).group(1))  # type: ignore[union-attr]
                assert pipes(pid, range(3, 1 << 20)) <= pipes(agent, range(3))
                assert pipes(agent, range(3, 1 << 20)) == set()
            assert daemon.returncode == 0, daemon.log[-2000:]
        finally:
            notify.close()


async def test_a_sigterm_while_it_becomes_the_daemon_stops_it_in_order(tmp_path: Path) -> None:
    async with FakeTelegram() as fake, Daemon(telegram_config(tmp_path, fake)) as daemon:
        pid = await until_daemon_proper(daemon)
        # The daemon proper is still importing what it needs: not ready for signals yet.
        os.kill(pid, signal.SIGTERM)
        assert await daemon.wait(WAIT) == 0, daemon.log[-2000:]
    # It started and then stopped as after any SIGTERM: nothing half done.
    stopping = daemon.log.index("SIGTERM received: stopping")
    assert daemon.log.index("shutting down") > stopping
    assert "Traceback" not in daemon.log



async def test_a_sigterm_while_run_checks_the_configuration_stops_it_in_order(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake, Daemon(telegram_config(tmp_path, fake)) as daemon:
        # `run` holds the stop signals from its start: the SIGTERM comes while it validates
        # (or, on a slow day, once it has become the daemon proper: the same for the operator).
        pid = await until(daemon, lambda pid: {signal.SIGTERM, signal.SIGINT} <= blocked(pid))
        os.kill(pid, signal.SIGTERM)
        assert await daemon.wait(WAIT) == 0, daemon.log[-2000:]
    assert daemon.log.index("shutting down") > daemon.log.index("SIGTERM received: stopping")


async def test_what_run_says_before_and_after_the_exec_comes_in_the_same_order(
        tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake)
        # Said before the exec: the config file others may read (it holds the token), the
        # agent program that is not installed. After it: the state_dir is another's.
        second = with_agent(config, ["/nonexistent/picobot"])
        async with Daemon(config) as first:
            await started(first, fake)
            assert first.proc is not None
            code, _, err = await run_cli("run", "--config", str(second))
    lines = err.splitlines()

    def where(text: str) -> int:
        return next(n for n, line in enumerate(lines) if text in line)

    assert code == 4, err
    assert where("holds a token and every user may read it") < where(
        "agent command not found: '/nonexistent/picobot'") < where(
        f"picobridge: another picobridge (pid {first.proc.pid}) is using {tmp_path / 'state'}")
    assert "Traceback" not in err


LAUNCHER = """
import sys
sys.path.insert(0, {folder!r})
from picobridge.cli import main
sys.exit(main())
"""


async def test_a_launcher_that_puts_picobridge_on_the_path_gets_a_daemon(tmp_path: Path) -> None:
    # As a zipapp (shiv, pex) or a script inserting its own folder does: picobridge is on the
    # import path only because the launcher put it there. -S: neither this checkout's
    # editable install nor the test venv's picobridge is importable by default.
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER.format(folder=str(Path(picobridge.__path__[0]).parent)),
                        encoding="utf-8")
    env = cli_env({"PYTHONPATH": sysconfig.get_paths()["purelib"]})
    async with FakeTelegram() as fake:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-S", str(launcher), "run", "--config",
            str(telegram_config(tmp_path, fake)), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
            cwd=REPO)
        assert proc.stderr is not None
        log = asyncio.ensure_future(proc.stderr.read())
        try:
            polled = asyncio.ensure_future(fake.wait_for_poll(timeout=WAIT))
            await asyncio.wait([polled, log], return_when=asyncio.FIRST_COMPLETED)
            assert polled.done(), (await log).decode()[-2000:]
            await polled
            fake.user_message(USER, USER, "launched")
            await reply_containing(fake, USER, "echo: launched")
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            await proc.wait()
    assert proc.returncode == 0, (await log).decode()[-2000:]
