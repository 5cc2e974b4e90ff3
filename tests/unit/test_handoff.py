"""The handoff's parts (cli/handoff.py, cli/signals.py HeldSignals): what goes through the
pipe and what the daemon proper does with signals that came before its loop; the whole of it,
with `picobridge run`, is tests/e2e/test_handoff.py."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from picobridge import exit_codes
from picobridge.adapters import registry
from picobridge.cli import handoff
from picobridge.cli.errors import CliError
from picobridge.cli.signals import HeldSignals, Signals


@dataclass(frozen=True)
class StandIn:
    """Picklable settings, as the daemon gets them."""

    token: str = "123:secret"
    routes: list[str] = field(default_factory=list)


@pytest.fixture
def sender_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `receive` sets is put back after the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(registry, "PLATFORMS", registry.PLATFORMS)


def received(read: int) -> tuple[object, bool]:
    """What the daemon proper gets: the import path as BOOT reads it, then the rest."""
    pipe = os.fdopen(read, "rb")
    sys.path[:] = pickle.load(pipe)
    return handoff.receive(pipe)


def through_a_pipe(settings: StandIn, announce: bool) -> int:
    read, write = os.pipe()
    try:
        handoff.send(write, cast(Any, settings), announce)
    finally:
        os.close(write)
    return read


@pytest.mark.usefixtures("sender_state")
def test_the_settings_come_through_and_the_pipe_is_closed() -> None:
    read = through_a_pipe(StandIn(routes=["a", "b"]), True)
    assert received(read) == (StandIn(routes=["a", "b"]), True)
    with pytest.raises(OSError):
        os.fstat(read)


@pytest.mark.usefixtures("sender_state")
def test_a_launchers_registrations_and_import_path_reach_the_daemon(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PLATFORMS", {**registry.PLATFORMS,
                                                "loopback": "loopback_platform:Platform"})
    monkeypatch.setattr(sys, "path", ["/launcher/dir", *sys.path])
    read = through_a_pipe(StandIn(), False)
    monkeypatch.setattr(registry, "PLATFORMS", {})
    monkeypatch.setattr(sys, "path", sys.path[1:])
    assert received(read) == (StandIn(), False)
    assert registry.PLATFORMS["loopback"] == "loopback_platform:Platform"
    assert sys.path[0] == "/launcher/dir"


@pytest.mark.usefixtures("sender_state")
def test_settings_larger_than_a_pipe_still_go_before_anyone_reads() -> None:
    # About 300 KB, beyond the 64 KB default: strings of their own (pickle writes one
    # object seen again as a reference).
    big = StandIn(routes=[f"{n:04}" + "x" * 1000 for n in range(300)])
    pipe: list[int] = []
    writer = threading.Thread(target=lambda: pipe.append(through_a_pipe(big, False)),
                              daemon=True)
    writer.start()
    writer.join(60)
    assert pipe, "send blocked: nobody reads until the exec"
    assert received(pipe[0]) == (big, False)


@pytest.mark.usefixtures("sender_state")
def test_settings_go_through_a_pipe_smaller_than_the_default() -> None:
    # A user beyond fs.pipe-user-pages-soft (pipe(7)) gets new pipes of a page or two.
    settings = StandIn(routes=[f"{n:04}" + "x" * 1000 for n in range(10)])  # about 10 KB
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    sent = threading.Thread(target=handoff.send, args=(write, settings, False), daemon=True)
    sent.start()
    sent.join(60)
    assert not sent.is_alive(), "send blocked: nobody reads until the exec"
    os.close(write)
    assert received(read) == (settings, False)


@pytest.mark.usefixtures("sender_state")
def test_exec_gives_the_new_program_the_pipe_and_what_was_typed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, list[str], bool, int]] = []

    def execv(path: str, argv: list[str]) -> None:
        fd = int(argv[argv.index(handoff.FD_FLAG) + 1])
        seen.append((path, argv, os.get_inheritable(fd), os.dup(fd)))
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "execv", execv)
    with pytest.raises(CliError) as refused:
        handoff.exec_daemon(cast(Any, StandIn()), ["run", "--config", "c.toml"], True)
    # What the operator sees if the interpreter went away (an upgrade under a running start).
    assert refused.value.code == exit_codes.FAILURE
    assert str(refused.value) == (f"cannot start the daemon: {sys.executable}: No such file "
                                  "or directory")
    [(path, argv, inheritable, copy)] = seen
    assert path == argv[0] == sys.executable and inheritable
    # -P: `python -c` would put the working directory (systemd: the state_dir, where agents
    # write) first on the import path.
    assert argv[argv.index("-c") - 1] == "-P" or sys.flags.safe_path
    assert argv[argv.index("-c") + 1:] == [handoff.BOOT, handoff.FD_FLAG, argv[-4], "run",
                                           "--config", "c.toml"]
    assert received(copy) == (StandIn(), True)  # all of it, the writer closed


HELD_SCRIPT = """
import os, signal
from picobridge.cli.signals import HeldSignals

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
os.kill(os.getpid(), signal.SIGHUP)  # pending, as across the exec
held = HeldSignals({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
held.install()
os.kill(os.getpid(), signal.SIGTERM)
print([s.name for s in held.taken()], flush=True)
print(signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []), flush=True)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
    os.kill(os.getpid(), sig)
print("not reached", flush=True)
"""


def test_held_signals_are_kept_in_order_unblocked_and_a_third_stop_is_obeyed() -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(HELD_SCRIPT)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.splitlines() == ["['SIGHUP', 'SIGTERM']", "False"], done.stderr
    assert done.returncode == 1
    assert "SIGTERM received a third time while starting: exiting now" in done.stderr


async def test_signals_act_on_what_was_held(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "picobridge.daemon")
    held = HeldSignals({signal.SIGTERM, signal.SIGHUP})
    held._take(signal.SIGHUP, None)
    held._take(signal.SIGTERM, None)
    signals = Signals(asyncio.get_running_loop(), held)
    signals.install()
    try:
        assert signals.stop_requested.is_set() and signals.first is signal.SIGTERM
    finally:
        signals.remove()
    assert "SIGHUP ignored" in caplog.text and "SIGTERM received: stopping" in caplog.text
    assert held.taken() == []
