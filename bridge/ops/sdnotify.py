"""systemd's notify protocol (sd_notify(3)) without libsystemd: readiness, status, stopping
and watchdog keep-alives as datagrams on $NOTIFY_SOCKET.

Everything here is best effort: a lost notification must never take the bridge down, so send
errors are logged, not raised. Without $NOTIFY_SOCKET (a terminal, a container) every call is
a no-op, which lets the daemon call it unconditionally.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping

log = logging.getLogger("picobridge.sdnotify")

Sleep = Callable[[float], Awaitable[None]]


class Notifier:
    """Talks to the service manager named by an environment mapping (os.environ in production)."""

    def __init__(self, environ: Mapping[str, str], *, pid: int | None = None) -> None:
        self._address = _socket_address(environ.get("NOTIFY_SOCKET", ""))
        self._watchdog_usec = environ.get("WATCHDOG_USEC", "")
        self._watchdog_pid = environ.get("WATCHDOG_PID", "")
        self._pid = os.getpid() if pid is None else pid
        self._sock: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def ready(self, status: str | None = None) -> None:
        self._send("READY=1", *_status_lines(status))

    def status(self, text: str) -> None:
        self._send(*_status_lines(text))

    def stopping(self, status: str | None = None) -> None:
        self._send("STOPPING=1", *_status_lines(status))

    def watchdog(self) -> None:
        self._send("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        """WatchdogSec= in seconds when the watchdog applies to this process, else None."""
        if not self.enabled or not self._watchdog_usec:
            return None
        # A forked child inherits the variables but is not the supervised process.
        if self._watchdog_pid and self._watchdog_pid != str(self._pid):
            return None
        try:
            usec = int(self._watchdog_usec)
        except ValueError:
            log.warning("ignoring malformed WATCHDOG_USEC")
            return None
        return usec / 1_000_000 if usec > 0 else None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _send(self, *lines: str) -> None:
        if self._address is None or not lines:
            return
        try:
            self._socket().sendto("\n".join(lines).encode("utf-8"), self._address)
        except OSError as exc:
            # BlockingIOError included: a full queue on systemd's side must not stall the loop.
            log.debug("sd_notify %s failed: %s", lines[0].split("=", 1)[0], exc)

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            # Called from the event loop; never block it waiting for the service manager.
            sock.setblocking(False)
            self._sock = sock
        return self._sock


def _socket_address(value: str) -> str | bytes | None:
    if not value:
        return None
    if value.startswith("@"):
        # Linux abstract namespace: a leading NUL byte instead of a filesystem path.
        return b"\0" + value[1:].encode("utf-8")
    if value.startswith("/"):
        return value
    # vsock and other exotic addresses are for VMs and initrds, not for this daemon.
    log.warning("NOTIFY_SOCKET %r is not a unix socket path; systemd notifications are off", value)
    return None


def _status_lines(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    # The protocol is newline separated assignments; a newline would start a bogus one.
    return ("STATUS=" + " ".join(text.splitlines()),)


async def watchdog_loop(
    notifier: Notifier,
    healthy: Callable[[], bool],
    interval: float,
    *,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Send WATCHDOG=1 every interval/2 while healthy() holds; run until cancelled.

    It runs on the event loop on purpose: when the loop is wedged nothing is sent, and systemd
    restarts the service after WatchdogSec=. Half the interval is what sd_watchdog_enabled(3)
    recommends, leaving room for one late tick.
    """
    period = interval / 2
    was_healthy = True
    while True:
        ok = _check(healthy)
        if ok:
            notifier.watchdog()
        if ok != was_healthy:
            if ok:
                log.info("healthy again; resuming watchdog keep-alives")
            else:
                log.warning(
                    "unhealthy; withholding watchdog keep-alives, systemd will restart "
                    "the service within %gs unless it recovers",
                    interval,
                )
            was_healthy = ok
        await sleep(period)


def _check(healthy: Callable[[], bool]) -> bool:
    try:
        return bool(healthy())
    except Exception:
        log.exception("health check for the watchdog raised; treating as unhealthy")
        return False


async def run_watchdog(notifier: Notifier, healthy: Callable[[], bool]) -> None:
    """watchdog_loop when systemd asked for a watchdog, otherwise return at once."""
    interval = notifier.watchdog_interval()
    if interval is None:
        return
    await watchdog_loop(notifier, healthy, interval)
