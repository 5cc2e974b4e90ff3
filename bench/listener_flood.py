"""Benchmark: the HTTP listener under a flood of half-open connections.

`picobridge run` in Telegram webhook mode against the fake Bot API, started with a soft limit
of 1024 open files (systemd's default). N connections are opened to http.listen, half sending
headers that never end, half a POST announcing 1 MB and sending one byte; meanwhile /healthz
is probed on fresh connections and a webhook update is delivered. Prints /healthz latency
(median, max), how long the webhook update took, when the last flood connection was closed,
and how much the daemon's log grew (at DEBUG).

Run: `python bench/listener_flood.py [--connections 1100] [--probes 40]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.e2e.flood_support import (  # noqa: E402
    Flood,
    log_bytes,
    probe_health,
    room_for,
    soft_fd_limit,
)
from tests.e2e.telegram_support import USER, reply_containing, telegram_config  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.harness import Daemon, free_port  # noqa: E402

HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0



async def main(connections: int, probes: int) -> None:
    room_for(connections + probes)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegram() as fake:
            config = telegram_config(
                Path(tmp), fake, mode="webhook", webhook_secret="bench-hook_secret",
                webhook_url=f"http://127.0.0.1:{port}/telegram/webhook",
                sections={"http": {"listen": f"127.0.0.1:{port}",
                                   "header_timeout": HEADER_TIMEOUT,
                                   "body_timeout": BODY_TIMEOUT}})
            async with Daemon(config, preexec=lambda: soft_fd_limit(1024)) as daemon:
                await daemon.wait_for_log(r"http listening")
                await daemon.wait_for_log(r"webhook set")
                before = log_bytes(daemon.log_lines)
                idle = [await probe_health(port, 10) for _ in range(5)]
                flood = Flood(port, connections)
                try:
                    await flood.open()
                    opened = time.monotonic() - flood.opened_at
                    fake.user_message(USER, USER, "through the flood")
                    sent = time.monotonic()
                    assert await fake.deliver_webhook() == 1
                    await reply_containing(fake, USER, "echo: through the flood", timeout=60)
                    answered = time.monotonic() - sent
                    latencies = [await probe_health(port, 10) for _ in range(probes)]
                    await flood.all_closed(timeout=BODY_TIMEOUT + 60)
                finally:
                    flood.close()
                growth = log_bytes(daemon.log_lines) - before
    print(f"connections: {connections} opened in {opened:.2f}s; all closed by the daemon "
          f"after {max(flood.closed_after):.1f}s (header_timeout {HEADER_TIMEOUT:g}s, "
          f"body_timeout {BODY_TIMEOUT:g}s)")
    print(f"/healthz idle: median {statistics.median(idle) * 1000:.1f} ms")
    print(f"/healthz under the flood ({probes} probes): median "
          f"{statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")
    print(f"webhook update through the flood answered in {answered:.2f}s")
    print(f"daemon log grew by {growth} bytes during the flood (log level DEBUG)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--probes", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.connections, args.probes))
