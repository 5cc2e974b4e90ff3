"""bridge/sdnotify.py against a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from picobridge.ops.sdnotify import Notifier, run_watchdog, watchdog_loop

WAIT = 5.0
pytestmark = pytest.mark.timeout(30)


class FakeSystemd:
    """The receiving end of NOTIFY_SOCKET."""

    def __init__(self, sock: socket.socket, env_value: str) -> None:
        self.sock = sock
        self.env_value = env_value

    def recv(self) -> str:
        self.sock.settimeout(WAIT)
        return self.sock.recv(4096).decode("utf-8")

    async def arecv(self) -> str:
        self.sock.setblocking(False)
        loop = asyncio.get_running_loop()
        data = await asyncio.wait_for(loop.sock_recv(self.sock, 4096), WAIT)
        return data.decode("utf-8")

    def nothing_pending(self) -> bool:
        self.sock.setblocking(False)
        try:
            self.sock.recv(4096)
        except BlockingIOError:
            return True
        return False


@pytest.fixture
def systemd() -> Iterator[FakeSystemd]:
    # A short directory of our own: AF_UNIX paths are limited to 108 bytes, pytest's are long.
    with tempfile.TemporaryDirectory(prefix="sdn") as directory:
        path = str(Path(directory) / "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        try:
            yield FakeSystemd(sock, path)
        finally:
            sock.close()


@pytest.fixture
def abstract_systemd() -> Iterator[FakeSystemd]:
    name = f"picobridge-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    try:
        yield FakeSystemd(sock, "@" + name)
    finally:
        sock.close()


def notifier_for(systemd: FakeSystemd, **extra: str) -> Notifier:
    return Notifier({"NOTIFY_SOCKET": systemd.env_value, **extra})


def test_lifecycle_datagrams_are_exact(systemd: FakeSystemd) -> None:
    notifier = notifier_for(systemd)
    notifier.ready()
    assert systemd.recv() == "READY=1"
    notifier.status("serving telegram, slack")
    assert systemd.recv() == "STATUS=serving telegram, slack"
    notifier.watchdog()
    assert systemd.recv() == "WATCHDOG=1"
    notifier.stopping()
    assert systemd.recv() == "STOPPING=1"
    notifier.close()


def test_ready_and_stopping_carry_an_optional_status(systemd: FakeSystemd) -> None:
    notifier = notifier_for(systemd)
    notifier.ready("agent ready")
    assert systemd.recv() == "READY=1\nSTATUS=agent ready"
    notifier.stopping("draining replies")
    assert systemd.recv() == "STOPPING=1\nSTATUS=draining replies"


def test_status_newlines_cannot_inject_assignments(systemd: FakeSystemd) -> None:
    notifier_for(systemd).status("line one\nREADY=1")
    assert systemd.recv() == "STATUS=line one READY=1"


def test_abstract_namespace_socket(abstract_systemd: FakeSystemd) -> None:
    notifier = notifier_for(abstract_systemd)
    assert notifier.enabled
    notifier.ready()
    assert abstract_systemd.recv() == "READY=1"


def test_without_notify_socket_everything_is_a_no_op() -> None:
    notifier = Notifier({"WATCHDOG_USEC": "60000000"})
    assert not notifier.enabled
    notifier.ready()
    notifier.status("x")
    notifier.watchdog()
    notifier.stopping()
    assert notifier.watchdog_interval() is None


def test_a_vanished_socket_is_not_fatal(tmp_path: Path) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone")})
    notifier.ready()  # logged, not raised


def test_watchdog_interval_from_usec(systemd: FakeSystemd) -> None:
    assert notifier_for(systemd, WATCHDOG_USEC="60000000").watchdog_interval() == 60.0
    assert notifier_for(systemd).watchdog_interval() is None
    assert notifier_for(systemd, WATCHDOG_USEC="0").watchdog_interval() is None
    assert notifier_for(systemd, WATCHDOG_USEC="soon").watchdog_interval() is None


def test_watchdog_pid_must_be_ours(systemd: FakeSystemd) -> None:
    ours = notifier_for(systemd, WATCHDOG_USEC="2000000", WATCHDOG_PID=str(os.getpid()))
    assert ours.watchdog_interval() == 2.0
    other = notifier_for(systemd, WATCHDOG_USEC="2000000", WATCHDOG_PID=str(os.getpid() + 1))
    assert other.watchdog_interval() is None
    injected = Notifier(
        {"NOTIFY_SOCKET": systemd.env_value, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "4242"},
        pid=4242,
    )
    assert injected.watchdog_interval() == 2.0


class SteppedSleep:
    """A sleep the test releases tick by tick, recording what the loop asked for."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.entered: asyncio.Queue[float] = asyncio.Queue()
        self._release: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        self.entered.put_nowait(delay)
        await self._release.get()

    async def next_tick(self) -> None:
        """Let the loop run one more iteration and wait until it sleeps again."""
        self._release.put_nowait(None)
        await asyncio.wait_for(self.entered.get(), WAIT)


async def test_watchdog_loop_pings_at_half_the_interval_only_while_healthy(
    systemd: FakeSystemd,
) -> None:
    notifier = notifier_for(systemd)
    sleep = SteppedSleep()
    healthy = True
    task = asyncio.create_task(watchdog_loop(notifier, lambda: healthy, 10.0, sleep=sleep))
    try:
        assert await asyncio.wait_for(sleep.entered.get(), WAIT) == 5.0
        assert await systemd.arecv() == "WATCHDOG=1"
        await sleep.next_tick()
        assert await systemd.arecv() == "WATCHDOG=1"

        healthy = False
        await sleep.next_tick()
        await sleep.next_tick()
        assert systemd.nothing_pending()

        healthy = True
        await sleep.next_tick()
        assert await systemd.arecv() == "WATCHDOG=1"
        assert set(sleep.delays) == {5.0}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watchdog_loop_treats_a_raising_check_as_unhealthy(systemd: FakeSystemd) -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    sleep = SteppedSleep()
    task = asyncio.create_task(watchdog_loop(notifier_for(systemd), broken, 10.0, sleep=sleep))
    try:
        await asyncio.wait_for(sleep.entered.get(), WAIT)
        assert systemd.nothing_pending()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_watchdog_loop_keeps_pinging_with_the_real_sleep(systemd: FakeSystemd) -> None:
    # The pace itself is the stepped test's (the delays asked for); this one is the default
    # sleep's wiring, so it asserts no durations.
    notifier = notifier_for(systemd)
    task = asyncio.create_task(watchdog_loop(notifier, lambda: True, 0.2))
    try:
        for _ in range(3):
            assert await systemd.arecv() == "WATCHDOG=1"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_run_watchdog_returns_at_once_without_a_watchdog(systemd: FakeSystemd) -> None:
    await asyncio.wait_for(run_watchdog(notifier_for(systemd), lambda: True), WAIT)
    assert systemd.nothing_pending()


async def test_run_watchdog_uses_watchdog_usec(systemd: FakeSystemd) -> None:
    notifier = notifier_for(systemd, WATCHDOG_USEC="200000", WATCHDOG_PID=str(os.getpid()))
    task = asyncio.create_task(run_watchdog(notifier, lambda: True))
    try:
        assert await systemd.arecv() == "WATCHDOG=1"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
