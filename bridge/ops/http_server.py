"""The daemon's optional local HTTP listener (`http.listen`): health and metrics, and the
webhook endpoints of adapters that use them (Slack HTTP mode, Telegram webhook mode)."""

from __future__ import annotations

import logging
import socket

from aiohttp import web

log = logging.getLogger("picobridge.http")


class HttpServer:
    def __init__(self, listen: str) -> None:
        host, _, port = listen.rpartition(":")
        self.host = host.strip("[]")
        self.port = int(port)
        self.app = web.Application(client_max_size=8 * 1024 * 1024)
        self._runner: web.AppRunner | None = None

    async def start(self, sock: socket.socket | None = None) -> None:
        """Serve on `sock` when given (bound beforehand: ops/listen.py), else bind here."""
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site: web.BaseSite = (web.SockSite(self._runner, sock) if sock is not None
                              else web.TCPSite(self._runner, self.host, self.port))
        await site.start()
        # With port 0 the OS picks one; report the real port for health URLs and tests.
        for address in self._runner.addresses:
            self.port = int(address[1])
        log.info("http listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
