"""`http.listen` as `check` and `run` meet it: a port in use or one the user may not have fails
in `check`; `run` binds it before anything connects, waits a bounded time for a port another
process holds (the previous instance during a deploy), then exits with a code systemd restarts
on (RestartPreventExitStatus in deploy/picobridge.service does not list it)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from picobridge import exit_codes
from tests.e2e.telegram_support import started, telegram_config
from tests.e2e.unprivileged import give_to_user, picobridge, shared_dir, source_site
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, http_port, run_cli, write_config

pytestmark = pytest.mark.timeout(180)


def unit_restarts_on(code: int) -> bool:
    unit = Path(__file__).resolve().parents[2] / "deploy" / "picobridge.service"
    line = next(line for line in unit.read_text().splitlines()
                if line.startswith("RestartPreventExitStatus="))
    return str(code) not in line.partition("=")[2].split()


@pytest.fixture
def holder() -> Iterator[socket.socket]:
    """A port another process holds, as a listening socket."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def http_line(out: str) -> str:
    return next(line for line in out.splitlines() if line[5:].startswith("http "))


async def test_check_binds_the_port_and_lets_it_go(tmp_path: Path,
                                                  holder: socket.socket) -> None:
    config = write_config(tmp_path, {"state_dir": str(tmp_path / "state")})
    listen = f"127.0.0.1:{port_of(holder)}"
    code, out, _ = await run_cli("check", "--echo", "--config", str(config),
                                 env={"PICOBRIDGE_HTTP__LISTEN": listen})
    assert code == exit_codes.FAILURE, out
    line = http_line(out)
    assert line.startswith("FAIL") and "Address already in use" in line
    assert "another process has the port" in line

    # A port that can be had (0: any free one, so that no other test's port is taken).
    code, out, _ = await run_cli("check", "--echo", "--config", str(config),
                                 env={"PICOBRIDGE_HTTP__LISTEN": "127.0.0.1:0"})
    assert http_line(out).startswith("ok   http      127.0.0.1:0 can be had"), out


async def test_check_accepts_the_port_its_own_running_daemon_holds(tmp_path: Path) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections={"http": {"listen": "127.0.0.1:0"}})
        async with Daemon(config) as daemon:
            await started(daemon, fake)
            port = await http_port(daemon)
            code, out, _ = await run_cli("check", "--config", str(config), env={
                "PICOBRIDGE_HTTP__LISTEN": f"127.0.0.1:{port}"})
            line = http_line(out)
            assert line.startswith("ok  ") and "a picobridge (pid " in line, out
            assert code == exit_codes.OK, out


async def test_run_gives_up_on_a_port_in_use_with_a_code_systemd_restarts_on(
        tmp_path: Path, holder: socket.socket) -> None:
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections={"http": {
            "listen": f"127.0.0.1:{port_of(holder)}", "listen_retry": 1}})
        daemon = Daemon(config)
        await daemon.start()
        code = await daemon.wait(60)
    assert code == exit_codes.BUSY and unit_restarts_on(code), daemon.log
    assert "the port is in use; trying again for up to 1s" in daemon.log
    last = daemon.log_lines[-1]
    assert last.startswith("picobridge: http.listen 127.0.0.1:") and "after trying for 1s" in last
    # Found before anything else started: no platform was asked, no agent was started.
    assert fake.calls == []
    assert AgentJournal(tmp_path / "agent").starts() == []


async def test_run_waits_for_a_port_the_previous_instance_still_holds(
        tmp_path: Path, holder: socket.socket) -> None:
    port = port_of(holder)
    async with FakeTelegram() as fake:
        config = telegram_config(tmp_path, fake, sections={"http": {
            "listen": f"127.0.0.1:{port}", "listen_retry": 120}})
        async with Daemon(config) as daemon:
            await daemon.wait_for_log(r"the port is in use; trying again")
            # The previous instance is gone. (Its port is free for a moment before the daemon's
            # next try, 0.5 s at most: another test binding port 0 is all but never given it.)
            holder.close()
            await daemon.wait_for_log(rf"http listening on 127\.0\.0\.1:{port}")
            await started(daemon, fake)
        assert daemon.returncode == 0, daemon.log


def test_a_port_below_1024_as_a_normal_user(tmp_path: Path) -> None:
    first_free = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    assert first_free > 1, "this kernel lets every user bind low ports: nothing to test"
    home = shared_dir("pb-port-") / "home"
    home.mkdir()
    give_to_user(home)
    config = write_config(home, {"state_dir": str(home / "state"),
                                 "http": {"listen": f"127.0.0.1:{first_free - 1}"}}, "pb.toml")
    config.chmod(0o644)
    done = picobridge(source_site(), "check", "--echo", "--config", str(config), home=home)
    line = http_line(done.stdout)
    assert line.startswith("FAIL") and "Permission denied" in line, done.stdout
    assert "ports below 1024 need root or CAP_NET_BIND_SERVICE" in line
    done = picobridge(source_site(), "chat", "--echo", "--config", str(config), home=home,
                      stdin="hi\n")
    assert done.returncode == exit_codes.CONFIG, done.stderr
    assert "ports below 1024 need root" in done.stderr.splitlines()[-1]
