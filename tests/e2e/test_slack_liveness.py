"""Inbound liveness through `picobridge run`: a Slack Socket Mode connection that stays open
but carries nothing, not even the answers to pings, is replaced after slack.silence_timeout
with a log line, /healthz shows Slack degraded meanwhile, and once Slack speaks again the
bridge answers as before; every platform's time since it last delivered is exported."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

from tests.e2e.slack_support import reply_to, slack_config
from tests.fakes.slack import FakeSlack
from tests.harness import Daemon, free_port

SILENCE = 3.0



def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _last_state(daemon: Daemon) -> str | None:
    states = [line.rsplit(" ", 1)[-1] for line in daemon.log_lines
              if "platform slack connected" in line or "platform slack disconnected" in line]
    return states[-1] if states else None


async def test_a_silent_socket_is_replaced_and_shows_as_degraded(tmp_path: Path) -> None:
    port = free_port()
    async with FakeSlack() as fake:
        config = slack_config(tmp_path, fake, silence_timeout=SILENCE,
                              sections={"http": {"listen": f"127.0.0.1:{port}"}})
        async with Daemon(config) as daemon:
            await fake.wait_for_socket()
            event = fake.dm_message("before")
            await fake.send_event(event)
            await reply_to(fake, event["channel"], "echo: before")
            status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz")
            assert status == 200 and json.loads(body)["status"] == "ok", body
            assert "slack" in json.loads(body)["platforms_last_event_seconds"]

            fake.silent = True  # the socket stays open; nothing comes through it
            line = await daemon.wait_for_log(r"connected but silent for \d+s", timeout=30)
            assert "replacing it with a new connection" in line
            await fake.wait_for(lambda: fake.silent_connections >= 1, "a new connection")
            status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz")
            health = json.loads(body)
            assert status == 200 and health["status"] == "degraded", body
            assert any("slack connected but silent" in w for w in health["warnings"]), body
            _, metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
            assert ('picobridge_platform_last_event_age_seconds{bot="default",platform="slack"}'
                    in metrics)

            fake.silent = False  # Slack speaks again: the next connection gets its hello
            await fake.wait_for(lambda: fake.socket_connects >= 2, "a speaking connection",
                                timeout=30)
            event = fake.dm_message("after")
            await fake.send_event(event)
            await reply_to(fake, event["channel"], "echo: after", timeout=30)
            await daemon.wait_until(lambda: _last_state(daemon) == "connected",
                                    what="slack reported connected again")
            status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/healthz")
            assert json.loads(body)["status"] == "ok", body
        assert daemon.returncode == 0
