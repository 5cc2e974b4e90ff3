"""The HTTP listener facing abuse, through `picobridge run` in Telegram webhook mode: a flood of
half-open connections against a daemon started with systemd's soft limit of 1024 open files,
and a request body dropped half-way."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.flood_support import Flood, log_bytes, probe_health, room_for, soft_fd_limit
from tests.e2e.telegram_support import USER, reply_containing, telegram_config
from tests.fakes.telegram import FakeTelegram
from tests.harness import Daemon, free_port

HALF_OPEN = 1100
HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 3.0
# Long enough for a loaded machine: the test shows /healthz answers through the flood; how
# fast it answers (the "within 2 s throughout") is bench/listener_flood.py's figure.
HEALTH_WAIT = 30.0
PROBES = 12



def _config(tmp_path: Path, fake: FakeTelegram, port: int) -> Path:
    return telegram_config(
        tmp_path, fake, mode="webhook", webhook_secret="flood-hook_secret",
        webhook_url=f"http://127.0.0.1:{port}/telegram/webhook",
        sections={"http": {"listen": f"127.0.0.1:{port}", "header_timeout": HEADER_TIMEOUT,
                           "body_timeout": BODY_TIMEOUT}})


def _around(log: str, needle: str) -> str:
    at = log.index(needle)
    return log[max(0, at - 300):at + 3000]


async def _started(daemon: Daemon) -> None:
    await daemon.wait_for_log(r"webhook set")
    await daemon.wait_for_log(r"http listening")


async def test_a_flood_of_half_open_connections_leaves_health_and_webhooks_working(
        tmp_path: Path) -> None:
    room_for(HALF_OPEN + PROBES)
    port = free_port()
    async with FakeTelegram() as fake:
        async with Daemon(_config(tmp_path, fake, port),
                          preexec=lambda: soft_fd_limit(1024)) as daemon:
            await _started(daemon)
            assert "open-file limit raised from 1024" in daemon.log
            log_before = log_bytes(daemon.log_lines)
            flood = Flood(port, HALF_OPEN)
            try:
                await flood.open()
                fake.user_message(USER, USER, "through the flood")
                delivery = asyncio.create_task(fake.deliver_webhook())
                # Each probe raises unless /healthz answers.
                for _ in range(PROBES):
                    await probe_health(port, HEALTH_WAIT)
                assert await delivery == 1
                await reply_containing(fake, USER, "echo: through the flood")
                # Every connection of the flood is closed: at once to make room, or when
                # its header or body time ran out.
                await flood.all_closed(timeout=max(HEADER_TIMEOUT, BODY_TIMEOUT) + 30)
            finally:
                flood.close()
            assert len(flood.closed_after) == HALF_OPEN
            await probe_health(port, HEALTH_WAIT)
            growth = log_bytes(daemon.log_lines) - log_before
            assert growth < 1_000_000, growth
            assert "Traceback" not in daemon.log, _around(daemon.log, "Traceback")
            assert "Error handling request" not in daemon.log
            assert "sent no complete request within 2s" in daemon.log
        assert daemon.returncode == 0


async def test_a_body_dropped_half_way_is_one_debug_line(tmp_path: Path) -> None:
    port = free_port()
    async with FakeTelegram() as fake, Daemon(_config(tmp_path, fake, port)) as daemon:
        await _started(daemon)
        for _ in range(3):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /telegram/webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Length: 5000\r\n\r\n" + b'{"update_id": 1' * 10)
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        await daemon.wait_until(
            lambda: daemon.log.count("the client dropped the request body") == 3,
            what="three dropped bodies")
        await probe_health(port, HEALTH_WAIT)  # raises unless /healthz answers
        dropped = [line for line in daemon.log_lines
                   if "dropped the request body" in line]
        assert all(" DEBUG " in line for line in dropped)
        assert "Traceback" not in daemon.log and " ERROR " not in daemon.log
