"""What the fake platforms share: an aiohttp server on 127.0.0.1, a log of every call, waiting
for a condition without polling, and one vocabulary of scripted faults.

Faults (the same names and meanings on FakeTelegram and FakeSlack):

- ``fail_next(method, status, times=, error=, retry_after=, extra=, body=)``: the next ``times``
  calls of ``method`` (``times=None``: every call until ``clear_faults``) get an error in the
  platform's own shape. ``error`` is the platform's error text (Telegram's description, Slack's
  error code); 429 always carries ``retry_after`` (default 1 s); ``body`` replaces the JSON
  envelope with raw bytes, as a proxy's HTML error page would.
- ``stall_next(method, times=)``: hold the next calls open, unanswered, until ``release()``
  (``stalled`` names the methods of the calls held now).
- ``disconnect_next(method, times=)``: drop the connection of the next calls without an answer.
- ``set_flood(every, retry_after=, methods=)``: every ``every``-th call of the platform's sending
  methods (or ``methods``) gets a 429 with ``retry_after``; ``every=0`` ends the flood.
- ``redeliver(id)``: deliver an incoming update/event again although the bot already took it
  (each fake implements it for its own delivery: Telegram updates, Slack events).
- ``revoke(token)``: calls made with that token fail as the platform fails a revoked token.
- ``clear_faults(method=None)``: forget queued faults and the flood, release stalled calls.

Besides API methods, ``fail_next`` and the others accept the pseudo-methods ``DOWNLOAD`` and
``UPLOAD`` for the file endpoints.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Literal, Self, TypeVar

from aiohttp import web

JSON = dict[str, Any]
T = TypeVar("T")

DOWNLOAD = "download"
UPLOAD = "upload"


@dataclass
class Call:
    """One request to a platform method, as the fake saw and answered it."""

    method: str
    params: JSON
    time: float = field(default_factory=time.monotonic)  # so tests can measure back-off
    token: str | None = None
    status: int = 200  # the HTTP status of the answer (0: the connection was dropped)
    response: JSON = field(default_factory=dict)  # the JSON body of the answer

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        """The platform's error text (Slack's ``error``, Telegram's ``description``)."""
        err = self.response.get("error", self.response.get("description"))
        return err if isinstance(err, str) else None


FaultKind = Literal["fail", "stall", "disconnect"]


@dataclass
class Fault:
    """A scripted misbehaviour of the next calls of one method."""

    kind: FaultKind
    status: int = 500
    error: str | None = None
    retry_after: int | None = None
    extra: JSON | None = None
    body: bytes | None = None
    remaining: int | None = 1  # None: until cleared or released


@dataclass
class _Flood:
    every: int
    retry_after: int
    methods: frozenset[str]
    count: int = 0


class FakeServer:
    """Base of the fake platforms; subclasses add routes and render errors their own way."""

    #: Methods a flood applies to unless set_flood names others.
    FLOOD_METHODS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 max_body: int = 64 * 1024 * 1024) -> None:
        self.host = host
        self.port = port
        self.max_body = max_body
        self.calls: list[Call] = []
        self.revoked_tokens: set[str] = set()
        self._faults: dict[str, deque[Fault]] = {}
        self._flood: _Flood | None = None
        self._releases: dict[str, int] = {}  # method (or "*") -> how often it was released
        self.stalled: list[str] = []  # the methods of the calls held open by stall_next now
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._closing = False
        # Every change sets this event and replaces it: waiters take the current one, re-check
        # their condition when it fires, and never poll.
        self._changed = asyncio.Event()

    # ---- lifecycle --------------------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def close_connections(self) -> None:
        """Subclasses end what outlives a request (websockets) before the server stops."""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> Self:
        """Serve on 127.0.0.1; a restart after stop() reuses the port (an outage, not a move)."""
        app = web.Application(client_max_size=self.max_body)
        self.add_routes(app)
        # Cancelling the handlers of vanished clients keeps long polls honest, as the platform
        # forgets a request whose client gave up.
        runner = web.AppRunner(app, access_log=None, handle_signals=False,
                               shutdown_timeout=1.0, handler_cancellation=True)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()
        self._runner = runner
        self._closing = False
        return self

    async def stop(self) -> None:
        self._closing = True
        self.notify()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.close_connections()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background until it ends or the server stops."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks.discard(finished)
            self.notify()

        task.add_done_callback(done)

    @property
    def idle(self) -> bool:
        """No background work (timers, deliveries) is pending in the fake."""
        return not self._tasks

    # ---- the call log and waiting -----------------------------------------------------------

    def record(self, call: Call) -> Call:
        self.calls.append(call)
        self.notify()
        return call

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def notify(self) -> None:
        """Wake wait_for(); the fake calls it on every change of its own state."""
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def until(self, predicate: Callable[[], object], timeout: float | None) -> bool:
        """Whether ``predicate()`` became true, seen at a notify(), within ``timeout`` (None:
        no limit). It is not checked again at the deadline: a condition that came true
        without a notify() is a bug that wait_for() reports instead of passing late."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not predicate():
            event = self._changed
            if deadline is None:
                await event.wait()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                # Not wait_for: on Python 3.11 it can swallow a cancellation that meets the
                # event's wake-up, and a caller looping on this would never stop.
                async with asyncio.timeout(remaining):
                    await event.wait()
            except TimeoutError:
                return False
        return True

    async def wait_for(self, predicate: Callable[[], T | None], what: str = "",
                       timeout: float = 30.0) -> T:
        """Wait until ``predicate()`` is truthy and return its value.

        It is re-checked whenever the fake's state changes; state the fake does not own wakes
        it only through ``notify()``. TimeoutError names ``what`` and the last calls; a
        condition that holds at the deadline although no notify() announced it raises
        AssertionError (a missing notify() in the fake or the test), never passes late.
        """
        result: list[T] = []

        def check() -> bool:
            value = predicate()
            if value:
                result.append(value)
            return bool(value)

        if await self.until(check, timeout):
            return result[-1]
        recent = ", ".join(f"{c.method}->{c.status}" for c in self.calls[-12:]) or "none"
        label = what or getattr(predicate, "__name__", "condition")
        if predicate():
            # Passing here would hide the bug and cost every such test the whole timeout.
            raise AssertionError(f"{type(self).__name__}: {label} came true but nothing "
                                 f"called notify() (last calls: {recent})")
        raise TimeoutError(f"{type(self).__name__}: {label} not met within {timeout}s "
                           f"(last calls: {recent})")

    async def wait_for_call(self, method: str, predicate: Callable[[Call], bool] | None = None,
                            *, count: int = 1, timeout: float = 30.0) -> Call:
        """Wait for ``count`` calls of ``method`` (matching ``predicate``); return the last."""

        def matching() -> list[Call]:
            return [c for c in self.calls_to(method) if predicate is None or predicate(c)]

        await self.wait_for(lambda: len(matching()) >= count, f"{count} x {method}", timeout)
        return matching()[count - 1]

    # ---- scripting faults -------------------------------------------------------------------

    def _add_fault(self, method: str, fault: Fault) -> None:
        self._faults.setdefault(method, deque()).append(fault)

    def fail_next(self, method: str, status: int = 500, *, times: int | None = 1,
                  error: str | None = None, retry_after: int | None = None,
                  extra: JSON | None = None, body: bytes | None = None) -> None:
        """Answer the next ``times`` calls of ``method`` with an error (see the module doc)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        self._add_fault(method, Fault("fail", status, error, retry_after, extra, body, times))

    def stall_next(self, method: str, times: int | None = 1) -> None:
        """Hold the next ``times`` calls of ``method`` open until release() or stop()."""
        self._add_fault(method, Fault("stall", remaining=times))

    def disconnect_next(self, method: str, times: int | None = 1) -> None:
        """Drop the connection of the next ``times`` calls of ``method`` without an answer."""
        self._add_fault(method, Fault("disconnect", remaining=times))

    def release(self, method: str | None = None) -> None:
        """Let stalled calls (of one method, or all) go on, and drop stalls still queued."""
        for name, queue in self._faults.items():
            if method is None or name == method:
                self._faults[name] = deque(f for f in queue if f.kind != "stall")
        key = method or "*"
        self._releases[key] = self._releases.get(key, 0) + 1
        self.notify()

    def set_flood(self, every: int, *, retry_after: int = 1,
                  methods: Iterable[str] | None = None) -> None:
        """Every ``every``-th call of the sending methods gets 429 (every=0: no flood)."""
        chosen = frozenset(methods) if methods is not None else self.FLOOD_METHODS
        self._flood = _Flood(every, retry_after, chosen) if every else None

    def revoke(self, token: str) -> None:
        """From now on the platform refuses ``token`` as a revoked one."""
        self.revoked_tokens.add(token)

    def clear_faults(self, method: str | None = None) -> None:
        if method is None:
            self._faults.clear()
            self._flood = None
        else:
            self._faults.pop(method, None)
        self.release(method)

    def error_envelope(self, fault: Fault) -> tuple[JSON, dict[str, str]]:
        """The platform's JSON answer (and headers) to a call failed by ``fault``."""
        raise NotImplementedError

    def error_response(self, fault: Fault, call: Call | None = None) -> web.Response:
        body, headers = self.error_envelope(fault)
        if call is not None:
            call.status, call.response = fault.status, body
            self.notify()
        return web.json_response(body, status=fault.status, headers=headers)

    def _take(self, method: str) -> Fault | None:
        queue = self._faults.get(method)
        if not queue:
            return None
        fault = queue[0]
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                queue.popleft()
        return fault

    async def _hold(self, method: str) -> bool:
        """Wait until the method is released; False when the server stopped meanwhile."""
        def count() -> tuple[int, int]:
            return self._releases.get(method, 0), self._releases.get("*", 0)

        before = count()
        self.stalled.append(method)
        self.notify()
        try:
            await self.until(lambda: self._closing or count() != before, None)
        finally:
            self.stalled.remove(method)
        return not self._closing

    async def guard(self, method: str, request: web.Request,
                    call: Call | None = None) -> web.StreamResponse | None:
        """Apply the scripted faults to a call: the answer to send instead, or None to serve it.

        The answer is recorded on ``call`` when one is given.
        """
        fault = self._take(method)
        if fault is not None and fault.kind == "stall":
            if not await self._hold(method):
                return self.error_response(Fault("fail", 502, "Bad Gateway"), call)
            fault = None
        if fault is not None and fault.kind == "disconnect":
            if call is not None:
                call.status = 0  # no answer at all
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if fault is not None and fault.body is not None:
            if call is not None:
                call.status = fault.status
            return web.Response(status=fault.status, body=fault.body, content_type="text/html")
        if fault is not None:
            return self.error_response(fault, call)
        flood = self._flood
        if flood is not None and method in flood.methods:
            flood.count += 1
            if flood.count % flood.every == 0:
                return self.error_response(Fault("fail", 429, retry_after=flood.retry_after), call)
        return None
