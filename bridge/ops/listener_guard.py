"""What keeps the HTTP listener standing when it faces the internet.

Every connection is counted. One that has not sent a request's headers is *idle*: it must
finish them within `header_timeout` of connecting (or of its previous response), else it is
cut off. A request's body must arrive within `body_timeout`. At `max_connections` a new
connection takes the place of the oldest idle one (a flood of half-open connections only
churns among itself, and a real client still gets in); when every connection is busy with a
request, a few more are let in for /healthz alone (health comes first) and the rest are closed
at once. Each cause is logged once per interval, never a traceback per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from picobridge.ops.log_throttle import LogThrottle

log = logging.getLogger("picobridge.http")

HEALTH_PATHS = frozenset({"/healthz"})
# Connections admitted beyond max_connections, for /healthz only.
HEALTH_RESERVE = 8

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ListenerLimits:
    max_connections: int = 256
    header_timeout: float = 10.0
    body_timeout: float = 30.0


class _Connection(asyncio.Protocol):
    """Stands between the transport and aiohttp's handler, so the guard sees the connection
    before aiohttp does and can refuse it without aiohttp knowing."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.health_only = False
        self.admitted = False
        self.cut_by_us = False
        self.since = 0.0  # when it became idle, or began to send its body

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.guard.admit(self):
            self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.admitted else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.admitted:
            self.guard.release(self)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.admitted:
            self.inner.resume_writing()

    def cut(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class ConnectionGuard:
    def __init__(self, limits: ListenerLimits, throttle: LogThrottle | None = None) -> None:
        self.limits = limits
        self._throttle = throttle or LogThrottle(log)
        self._open: dict[asyncio.BaseTransport, _Connection] = {}
        # Idle connections, oldest first: the ordinary ones and those of the health reserve.
        self._idle: dict[bool, OrderedDict[_Connection, None]] = {False: OrderedDict(),
                                                                  True: OrderedDict()}
        # Requests whose body is still arriving, oldest first.
        self._reading: OrderedDict[_Connection, None] = OrderedDict()
        self._reserve = 0
        self._sweeper: asyncio.TimerHandle | None = None
        self.refused = 0
        self.evicted = 0
        self.timed_out = 0

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def protocol_factory(self, inner: Callable[[], asyncio.Protocol]
                         ) -> Callable[[], asyncio.Protocol]:
        return lambda: _Connection(self, inner())

    # --- admission -------------------------------------------------------------------------

    def admit(self, conn: _Connection) -> bool:
        if len(self._open) - self._reserve >= self.limits.max_connections:
            victim = self._oldest_waiting()
            if victim is not None:
                self._evict(victim)
            elif self._reserve < HEALTH_RESERVE:
                conn.health_only = True
            elif self._idle[True]:
                self._evict(next(iter(self._idle[True])))
                conn.health_only = True
            else:
                self.refused += 1
                self._throttle(logging.WARNING, "refused",
                               "http: %d connections busy (http.max_connections) and the health "
                               "reserve is full: new connections are closed at once",
                               self.limits.max_connections)
                conn.cut()
                return False
        assert conn.transport is not None
        conn.admitted = True
        self._open[conn.transport] = conn
        if conn.health_only:
            self._reserve += 1
        self._set_idle(conn)
        return True

    def _oldest_waiting(self) -> _Connection | None:
        """The ordinary connection waiting longest for a request head or a body."""
        heads = [next(iter(d)) for d in (self._idle[False], self._reading) if d]
        return min(heads, key=lambda c: c.since) if heads else None

    def release(self, conn: _Connection) -> None:
        if conn.transport is not None and self._open.pop(conn.transport, None) is not None:
            self._idle[conn.health_only].pop(conn, None)
            self._reading.pop(conn, None)
            if conn.health_only:
                self._reserve -= 1

    def _evict(self, conn: _Connection) -> None:
        self.evicted += 1
        self._throttle(logging.WARNING, "evicted",
                       "http: at http.max_connections (%d): connections still waiting for a "
                       "request or its body are closed, oldest first, to make room",
                       self.limits.max_connections)
        self._cut(conn)

    def _cut(self, conn: _Connection) -> None:
        conn.cut_by_us = True
        self.release(conn)
        conn.cut()

    # --- idle connections and their deadline -----------------------------------------------

    def _set_idle(self, conn: _Connection) -> None:
        conn.since = asyncio.get_running_loop().time()
        idle = self._idle[conn.health_only]
        idle[conn] = None
        idle.move_to_end(conn)
        if self._sweeper is None:
            self._schedule_sweep(self.limits.header_timeout)

    def _schedule_sweep(self, delay: float) -> None:
        self._sweeper = asyncio.get_running_loop().call_later(delay, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        now = asyncio.get_running_loop().time()
        deadline = now - self.limits.header_timeout
        cut = 0
        for idle in self._idle.values():
            while idle and next(iter(idle)).since <= deadline:
                self._cut(next(iter(idle)))
                cut += 1
        if cut:
            self.timed_out += cut
            self._throttle(logging.WARNING, "slow headers",
                           "http: closed connection(s) that sent no complete request within "
                           "%gs (http.header_timeout)", self.limits.header_timeout)
        heads = [next(iter(idle)).since for idle in self._idle.values() if idle]
        if heads:
            self._schedule_sweep(max(0.05, min(heads) - deadline))

    # --- requests --------------------------------------------------------------------------

    def request_started(self, transport: asyncio.BaseTransport | None,
                        with_body: bool) -> _Connection | None:
        conn = self._open.get(transport) if transport is not None else None
        if conn is not None:
            self._idle[conn.health_only].pop(conn, None)
            if with_body and not conn.health_only:
                conn.since = asyncio.get_running_loop().time()
                self._reading[conn] = None
        return conn

    def body_read(self, conn: _Connection | None) -> None:
        if conn is not None:
            self._reading.pop(conn, None)

    def request_finished(self, conn: _Connection | None) -> None:
        if conn is not None and conn.transport in self._open:
            self._reading.pop(conn, None)
            self._set_idle(conn)

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    # --- the request side ------------------------------------------------------------------

    def middleware(self) -> Any:
        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            conn = self.request_started(request.transport, request.body_exists)
            try:
                if conn is not None and conn.health_only and request.path not in HEALTH_PATHS:
                    return await _answer_and_close(request, 503, "busy, try again\n")
                if request.body_exists:
                    refused = await self._read_body(request, conn)
                    if refused is not None:
                        return refused
                return await handler(request)
            finally:
                self.request_finished(conn)

        return guard

    async def _read_body(self, request: web.Request,
                         conn: _Connection | None) -> web.StreamResponse | None:
        """Reads the body into the request (handlers read it from there), or the response
        that ends a request whose body came too slowly or not at all."""
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                await request.read()
        except TimeoutError:
            self.timed_out += 1
            self._throttle(logging.WARNING, "slow body",
                           "http: cut off request(s) whose body did not arrive within %gs "
                           "(http.body_timeout)", self.limits.body_timeout)
            return await _answer_and_close(request, 408, "request body too slow\n")
        except (ConnectionError, HttpProcessingError, RuntimeError) as exc:
            # aiohttp says "Connection closed." with a RuntimeError once the peer is gone.
            if isinstance(exc, RuntimeError) and request.protocol.transport is not None:
                raise
            if conn is None or not conn.cut_by_us:
                # The client went away mid-body: nothing to answer, nothing wrong here.
                log.debug("http: %s %s: the client dropped the request body (%s)",
                          request.method, request.path, exc.__class__.__name__)
            return await _answer_and_close(request, 400, "incomplete body\n")
        finally:
            self.body_read(conn)
        return None


async def _answer_and_close(request: web.Request, status: int, text: str) -> web.Response:
    """Answer and close at once: left to aiohttp, a request whose body was not read keeps
    its connection up to 10 s more (lingering) to read the rest, which is what an attacker
    wants."""
    response = web.Response(status=status, text=text)
    response.force_close()
    with contextlib.suppress(ConnectionError, RuntimeError):
        await response.prepare(request)
        await response.write_eof()
    if request.transport is not None:
        request.transport.close()
    return response


@contextlib.contextmanager
def quiet_accept_errors(loop: asyncio.AbstractEventLoop,
                        throttle: LogThrottle | None = None) -> Any:
    """asyncio reports each failed accept() (no file descriptors left) with a traceback;
    while this holds, they are one warning per interval."""
    throttle = throttle or LogThrottle(log)
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if message.startswith("socket.accept() out of system resource"):
            exc = context.get("exception")
            throttle(logging.WARNING, "accept",
                     "http: cannot accept connections: %s (out of file descriptors?)",
                     exc if exc is not None else message)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    try:
        yield
    finally:
        loop.set_exception_handler(previous)
