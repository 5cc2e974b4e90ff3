"""What systemd and an operator see of `picobridge run`: sd_notify readiness, status, watchdog
and stopping; /healthz and /metrics; `picobridge health`."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.telegram_support import USER, reply_containing, started, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import AgentJournal, Daemon, run_cli


class NotifySocket:
    """The datagram socket systemd would listen on, bound by the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.received: list[tuple[float, str]] = []

    async def next(self, timeout: float = 20) -> str:
        loop = asyncio.get_running_loop()
        data = await asyncio.wait_for(loop.sock_recv(self.sock, 4096), timeout)
        text = data.decode()
        self.received.append((loop.time(), text))
        return text

    async def until(self, prefix: str, timeout: float = 20) -> str:
        async def find() -> str:
            while True:
                text = await self.next(timeout)
                if text.startswith(prefix):
                    return text
        return await asyncio.wait_for(find(), timeout)

    def drain(self) -> list[str]:
        """Datagrams already delivered (unix datagrams are queued at send time)."""
        drained = []
        while True:
            try:
                drained.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return drained

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_systemd_ready_watchdog_and_stopping(tmp_path: Path, fake: FakeTelegram) -> None:
    notify = NotifySocket(tmp_path / "notify.sock")
    config = telegram_config(tmp_path, fake, "--ready-once",
                             agent={"restart_budget": 2, "ready_timeout": 1})
    env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "2000000"}
    try:
        async with Daemon(config, env=env) as daemon:
            ready = await notify.until("READY=1")
            # READY only once the agent is up and Telegram is connected.
            assert "STATUS=agent ready" in ready and "telegram up" in ready
            await started(daemon, fake)

            # Keep-alives every WATCHDOG_USEC/2 while healthy.
            beats = [await notify.until("WATCHDOG=1", timeout=5) for _ in range(3)]
            assert beats == ["WATCHDOG=1"] * 3

            # The agent dies and its restarts never become ready: beyond the restart budget
            # the keep-alives stop, so systemd would restart the whole service.
            fake.user_message(USER, USER, "#crash bye")
            await daemon.wait_for_log("withholding watchdog keep-alives", timeout=30)
            notify.drain()  # keep-alives sent before the decision
            with pytest.raises(TimeoutError):
                await notify.until("WATCHDOG=1", timeout=3)

            await daemon.stop()
            assert daemon.returncode == 0
            await notify.until("STOPPING=1", timeout=5)
    finally:
        notify.close()
    starts = AgentJournal(tmp_path / "agent").starts()
    assert len(starts) >= 2
    # The agent never saw our notify socket, watchdog or configuration variables.
    assert all(s["env"] == [] for s in starts)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in metrics")


async def test_health_and_metrics_follow_the_traffic(tmp_path: Path, fake: FakeTelegram) -> None:
    port = free_port()
    config = telegram_config(tmp_path, fake, sections={"http": {"listen": f"127.0.0.1:{port}"}})
    base = f"http://127.0.0.1:{port}"
    async with Daemon(config) as daemon:
        await started(daemon, fake)
        await daemon.wait_for_log(r"ready: agent ready")
        status, body = await asyncio.to_thread(get, f"{base}/healthz")
        health = json.loads(body)
        assert status == 200, body
        assert health["status"] == "ok"
        assert health["agent"]["state"] == "ready" and health["agent"]["pid"] > 0
        assert health["platforms"] == {"telegram": "connected"}

        _, before = await asyncio.to_thread(get, f"{base}/metrics")
        series = 'picobridge_messages_in_total{bot="default",platform="telegram"}'
        assert metric(before, series) == 0

        fake.user_message(USER, USER, "count me")
        await reply_containing(fake, USER, "echo: count me")
        await fake.wait_for(lambda: True)
        _, after = await asyncio.to_thread(get, f"{base}/metrics")
        assert metric(after, series) == 1
        assert metric(after, 'picobridge_turns_total{outcome="done"}') == 1
        assert metric(after, "picobridge_turn_latency_seconds_count") == 1
        assert metric(after, "picobridge_agent_up") == 1

        code, out, _ = await run_cli("health", "--config", str(config))
        assert code == 0 and out.startswith("healthy: ")

        # The platform goes away: health says so, and `picobridge health` fails.
        await fake.stop()
        await daemon.wait_for_log(r"platform telegram disconnected", timeout=60)
        status, body = await asyncio.to_thread(get, f"{base}/healthz")
        assert status == 503
        assert "telegram disconnected" in json.loads(body)["problems"]
        code, out, _ = await run_cli("health", "--config", str(config))
        assert code == 1 and out.startswith("unhealthy: ")
