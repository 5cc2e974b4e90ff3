"""Socket Mode: slack-sdk's client carries the websocket, dispatch.py decides what each envelope
gets, and a watch loop under the daemon's supervision keeps the client alive.

The SDK reconnects by itself after a dropped connection, but it has known ways of ending up
connected to nothing for good (a reconnect failing half-way, its processing task gone:
slack-sdk issues 1446 and 1110, where its authors advise replacing such a client). Then no
event would ever arrive while everything looks up. `watch` (run by BridgeLink.keep_running,
so its own death is logged, restarted and, when it persists, makes the daemon unhealthy)
reports the connection state every MONITOR_INTERVAL and replaces the client when its
processing task ended, or when it stayed disconnected for HEAL_AFTER seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.slack.dispatch import Dispatcher

log = logging.getLogger("picobridge.slack")

MONITOR_INTERVAL = 2.0
# The SDK reconnects within seconds and retries every PING_INTERVAL; a client disconnected
# this long is no longer trying in a way that works.
HEAL_AFTER = 60.0
PING_INTERVAL = 10.0
CLOSE_WAIT = 5.0


class SocketLink:
    def __init__(self, app_token: str, web: AsyncWebClient, dispatcher: Dispatcher,
                 logger: logging.Logger, report: Callable[[bool], None], *,
                 silence_timeout: float = 120.0, heard: Callable[[], None] = lambda: None,
                 silence: Callable[[float | None], None] = lambda _: None) -> None:
        """`report(up)` hears the connection state, `heard()` that something arrived,
        `silence(seconds)` that a connection said to be up carries nothing (None: it speaks
        again); `logger` is the SDK's (capped: at debug it would log whole payloads)."""
        self._silence_timeout = silence_timeout
        self._heard = heard
        self._silence = silence
        self._last_heard = time.monotonic()
        self._last_pong: float | None = None
        self._app_token = app_token
        self._web = web
        self._dispatcher = dispatcher
        self._logger = logger
        self._report = report
        self._tasks = TaskSet(log)
        self._client: SocketModeClient | None = None
        self._down_since: float | None = None
        self._closed = False

    @property
    def client(self) -> SocketModeClient | None:
        return self._client

    def _new_client(self) -> SocketModeClient:
        # Pings often enough that a quiet but sound connection is never taken for silent.
        client = SocketModeClient(app_token=self._app_token, logger=self._logger,
                                  web_client=self._web,
                                  ping_interval=min(PING_INTERVAL, self._silence_timeout / 3))
        client.message_listeners.append(self._dispatcher.screen)
        client.on_message_listeners.append(self._arrived)
        client.socket_mode_request_listeners.append(self._dispatcher.socket_request)
        return client

    def connect(self) -> asyncio.Task[None]:
        """Start a new client connecting (the SDK retries until it is up or closed)."""
        client = self._client = self._new_client()
        self._down_since = time.monotonic()
        # Not reported by the task set: the caller judges the outcome (start, or watch).
        connecting = client.connect()  # type: ignore[no-untyped-call]
        return self._tasks.spawn(connecting, name="slack-connect", report=False)

    async def _arrived(self, message: object) -> None:
        self._mark_heard()

    def _mark_heard(self) -> None:
        self._last_heard = time.monotonic()
        self._heard()

    async def watch(self) -> None:
        """Report the connection and heal the client, forever."""
        while not self._closed:
            await asyncio.sleep(min(MONITOR_INTERVAL, self._silence_timeout / 3))
            client = self._client
            if client is None or self._closed:
                continue
            up = await client.is_connected()
            self._report(up)
            if client.last_ping_pong_time != self._last_pong:  # the answer to a ping
                self._last_pong = client.last_ping_pong_time
                if self._last_pong is not None:
                    self._mark_heard()
            reason = self._broken(client, up) or self._silent(up)
            if reason is not None:
                log.warning("Socket Mode client %s; replacing it with a new connection", reason)
                await self._replace()

    def _broken(self, client: SocketModeClient, up: bool) -> str | None:
        processor = client.message_processor
        if processor is not None and processor.done():
            return "stopped processing what Slack sends"
        if up:
            self._down_since = None
            return None
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        if now - self._down_since >= HEAL_AFTER:
            return f"disconnected for {now - self._down_since:.0f}s"
        return None

    def _silent(self, up: bool) -> str | None:
        quiet = time.monotonic() - self._last_heard
        if not up or quiet < self._silence_timeout:
            return None
        self._silence(quiet)
        self._last_heard = time.monotonic()  # the new connection gets its own time
        return (f"connected but silent for {quiet:.0f}s, not even answering pings "
                "(slack.silence_timeout)")

    async def _replace(self) -> None:
        old = self._client
        self._client = None
        if old is not None:
            await _close(old)
        if not self._closed:
            self.connect()

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await _close(client)
        await self._tasks.close()


async def _close(client: SocketModeClient) -> None:
    # A broken client may hang or fail while closing; it is being dropped either way.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_WAIT):
            await client.close()  # type: ignore[no-untyped-call]
