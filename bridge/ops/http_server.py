"""The daemon's optional local HTTP listener (`http.listen`): health and metrics, and the
webhook endpoints of adapters that use them (Slack HTTP mode, Telegram webhook mode).

It may face the internet (webhooks), so it is served through a ConnectionGuard
(listener_guard.py): time limits on headers and bodies, a cap on connections, health first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from aiohttp import web

from picobridge.ops.fd_limit import fd_soft_limit
from picobridge.ops.listener_guard import ConnectionGuard, ListenerLimits, quiet_accept_errors

log = logging.getLogger("picobridge.http")

# File descriptors kept for everything but the listener: the database, the agents' pipes,
# the platforms' own connections, downloads.
FDS_KEPT_BACK = 256


class HttpServer:
    def __init__(self, listen: str, limits: ListenerLimits | None = None) -> None:
        host, _, port = listen.rpartition(":")
        self.host = host.strip("[]")
        self.port = int(port)
        self.guard = ConnectionGuard(_within_fd_limit(limits or ListenerLimits()))
        self.app = web.Application(client_max_size=8 * 1024 * 1024,
                                   middlewares=[self.guard.middleware()])
        self._runner: web.AppRunner | None = None
        self._server: asyncio.AbstractServer | None = None
        self._quiet = contextlib.ExitStack()

    async def start(self, sock: socket.socket | None = None) -> None:
        """Serve on `sock` when given (bound beforehand: ops/listen.py), else bind here."""
        # aiohttp's keep-alive timer is a backstop; the guard cuts idle connections first.
        self._runner = web.AppRunner(self.app, access_log=None,
                                     keepalive_timeout=self.guard.limits.header_timeout + 1)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._quiet.enter_context(quiet_accept_errors(loop))
        factory = self.guard.protocol_factory(server)
        try:
            if sock is not None:
                self._server = await loop.create_server(factory, sock=sock, backlog=512)
            else:
                self._server = await loop.create_server(factory, self.host or None, self.port,
                                                        backlog=512)
        except BaseException:
            self._quiet.close()
            await self._runner.cleanup()
            self._runner = None
            raise
        # With port 0 the OS picks one; report the real port for health URLs and tests.
        for bound in self._server.sockets:
            self.port = int(bound.getsockname()[1])
        log.info("http: at most %d connections, %gs for a request head, %gs for a body",
                 self.guard.limits.max_connections, self.guard.limits.header_timeout,
                 self.guard.limits.body_timeout)
        log.info("http listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self.guard.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._quiet.close()


def _within_fd_limit(limits: ListenerLimits) -> ListenerLimits:
    room = fd_soft_limit() - FDS_KEPT_BACK
    if limits.max_connections <= room:
        return limits
    fitted = max(16, room)
    log.warning("http.max_connections %d does not fit the open-file limit (%d): %d are used; "
                "raise LimitNOFILE= (systemd) or ulimit -n", limits.max_connections,
                fd_soft_limit(), fitted)
    return ListenerLimits(fitted, limits.header_timeout, limits.body_timeout)
